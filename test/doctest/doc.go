// Package doctest runs the examples of the documentation: fenced blocks with the info string "sh doctest" hold
// shell commands, each on a line starting with "$ " (continued on the next lines while a line ends with a
// backslash), followed by the output the command prints. A test runs every command of a document in order, in one
// bash session (so variables, files and the working directory carry over from block to block), and compares what
// each prints, stdout and stderr together, with the lines the document shows.
//
// In an expected line, "..." matches any text, and a line that is exactly "..." matches any number of lines. A
// command the document shows no output for must succeed (exit 0), whatever it prints; a command with output shown
// must print exactly that, and may fail: an error message is part of the example.
package doctest
