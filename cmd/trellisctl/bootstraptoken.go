package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/trellis-dev/trellis/gateway/kjson"
	"github.com/trellis-dev/trellis/hub/auth"
)

// seed runs `seed bootstrap-token create SEED [--validity D]`: it creates a bootstrap token for a seed's agent (a
// Secret kube-system/bootstrap-token-<id>, as Kubernetes and Gardener keep them) and prints the token, for the
// agent's hubClientConnection.bootstrapToken.
func (c *client) seed(args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 || args[0] != "bootstrap-token" || args[1] != "create" {
		return fmt.Errorf("usage: trellisctl seed bootstrap-token create SEED [--validity 1h]")
	}
	fs := flag.NewFlagSet("seed bootstrap-token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	validity := fs.Duration("validity", time.Hour, "how long the token may be used")
	rest, err := parseInterleaved(fs, args[2:])
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("usage: trellisctl seed bootstrap-token create SEED [--validity 1h]")
	}
	if *validity <= 0 {
		return fmt.Errorf("--validity: must be positive, got %s", *validity)
	}
	tok, err := auth.NewSeedBootstrapToken(rest[0], time.Now().Add(*validity))
	if err != nil {
		return err
	}
	body, err := kjson.Marshal(tok.SecretObject())
	if err != nil {
		return err
	}
	code, out, err := c.do(http.MethodPost, "/api/v1/namespaces/"+auth.BootstrapTokenNamespace+"/secrets", body, "application/json")
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return statusError(code, out)
	}
	fmt.Fprintln(stdout, tok.Token())
	return nil
}
