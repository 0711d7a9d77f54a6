// Package columns owns the table columns of the kinds, one definition for trellisctl's tables and the hub's Table
// responses (kubectl get): the trellis.cli.v1 column options of a kind's message and its fields (Of, which
// cmd/protoc-gen-trellisctl generates ctl/kinds from and the hub reads from the compiled descriptors), and how a
// column renders its cell from the object's JSON (Cell).
package columns
