// Command gen writes the hub's OpenAPI documents (package hub/openapi) into docs/openapi: swagger.json (v2) and
// v3/<group-version>_openapi.json, named as kube-apiserver's api/openapi-spec names them. It reads the protos from a
// `buf build` image, so that the documents carry the protos' comments. `make generate` runs it.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/openapi"
)

func main() {
	image := flag.String("image", "", "binary FileDescriptorSet with source info, as `buf build -o x.binpb` writes it")
	out := flag.String("out", "docs/openapi", "directory to write the documents into")
	flag.Parse()
	data, err := os.ReadFile(*image)
	if err != nil {
		log.Fatal(err)
	}
	files, err := openapi.FilesFromImage(data)
	if err != nil {
		log.Fatal(err)
	}
	docs, err := openapi.Build(files, api.Kinds)
	if err != nil {
		log.Fatal(err)
	}
	if err := openapi.Write(docs, *out); err != nil {
		log.Fatal(err)
	}
}
