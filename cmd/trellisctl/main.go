// Command trellisctl is the command-line client of a Trellis hub. It speaks the hub's REST API with Gardener's
// manifests: apply creates or updates objects from YAML or JSON files (several documents per file, or directories),
// get and delete address objects by resource and name. The hub, its CA and the token come from --hub, --ca and
// --token or the TRELLIS_HUB, TRELLIS_CA and TRELLIS_TOKEN environment variables.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
