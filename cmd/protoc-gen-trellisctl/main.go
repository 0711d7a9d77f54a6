// Command protoc-gen-trellisctl is the protoc plugin that generates trellisctl's table of kinds (package ctl/kinds)
// from the protos' <Kind>Service services; package ctl/ctlgen is the generator. buf runs it with strategy all (one
// output file for all protos). Parameters: import_path (default github.com/trellis-dev/trellis/ctl/kinds), package
// (default: the import path's last element) and file (default kinds.go).
package main

import (
	"flag"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/trellis-dev/trellis/ctl/ctlgen"
)

func main() {
	var opts ctlgen.Options
	var flags flag.FlagSet
	for _, name := range []string{"import_path", "package", "file"} {
		flags.Func(name, "", func(v string) error { return opts.Set(name, v) })
	}
	protogen.Options{ParamFunc: flags.Set}.Run(func(p *protogen.Plugin) error {
		p.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		return ctlgen.Generate(p, opts)
	})
}
