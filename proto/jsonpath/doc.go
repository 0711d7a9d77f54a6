// Package jsonpath owns the JSONPath subset evaluated on objects decoded from JSON: the paths of table columns
// (trellis.cli.v1.Column.json_path, in trellisctl's tables and the hub's Table responses) and of trellisctl's
// `wait --for=jsonpath=...`. It is kubectl's JSONPath without
// templates: a path is "." (the whole value) or a sequence of
//
//	.name               a field (letters, digits, '_', '-', '/')
//	['key'] ["key"]     a field whose name has other characters (labels, annotations)
//	[3] [-1]            a list element
//	[*]                 every element of a list, every value of a map (in key order)
//	[?(@.a.b=="x")]     the list elements whose sub-path equals (==) or differs from (!=) a string, number, true,
//	                    false or null
//
// optionally in braces ("{.spec.region}"). Evaluation never fails: what is not there selects nothing.
package jsonpath
