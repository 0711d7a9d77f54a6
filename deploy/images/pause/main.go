// Command pause is the sandbox ("pause") container of a local node's pods, as Kubernetes' own pause: it holds the
// pod's namespaces, reaps the zombies of processes that share its PID namespace, and exits 0 on SIGINT or SIGTERM.
// Built statically (CGO_ENABLED=0) into the image local.trellis.dev/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
