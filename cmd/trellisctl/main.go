// Command trellisctl is the command-line client of a Trellis hub; package ctl is the command tree and docs/cli.md
// the guide. The kinds it serves are generated from the protos into package ctl/kinds.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/trellis-dev/trellis/ctl"
	"github.com/trellis-dev/trellis/ctl/kinds"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "devel"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Main(ctx, os.Args[1:], ctl.Options{Kinds: kinds.All, Version: version})
	stop()
	os.Exit(code)
}
