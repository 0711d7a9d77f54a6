package config

import (
	"fmt"
	"os"
	"strings"
)

// DefaultHub is where a command connects when neither flags, environment nor context name a hub: the address the
// hub listens on by default.
const DefaultHub = "https://127.0.0.1:8443"

// Overrides are the connection settings of the command line, each empty when not given.
type Overrides struct {
	// Context picks a context instead of the current one.
	Context string
	// Hub, CA (a file) and Token replace the context's.
	Hub, CA, Token string
	// Namespace and Project replace the context's default namespace and project.
	Namespace, Project string
}

// Target is where and as whom a command connects.
type Target struct {
	// Context is the context used, "" if none.
	Context string
	// Hub is the hub's URL, https://host:port.
	Hub string
	// CA is the PEM of the hub's CA; nil means the system's roots.
	CA []byte
	// Token is the bearer token, "" for none.
	Token string
	// Namespace and Project are the defaults for namespaced commands.
	Namespace, Project string
}

// Resolve returns the target of a command: the context (flags.Context, or the current one), overridden by the
// environment variables TRELLIS_HUB, TRELLIS_CA and TRELLIS_TOKEN, overridden by flags. A context's CA and token go
// only to the context's own hub: once the environment or the flags name another hub, only their CA and token are
// used, so that a token is never sent where it was not meant to go.
func (c *Config) Resolve(flags Overrides, getenv func(string) string) (Target, error) {
	var ctx Context
	name := flags.Context
	if name == "" {
		name = c.CurrentContext
	}
	if name != "" {
		found, ok := c.Context(name)
		if !ok {
			if flags.Context != "" {
				return Target{}, fmt.Errorf("no context %q in the configuration (see trellisctl config get-contexts)", name)
			}
			return Target{}, fmt.Errorf("the current context %q is not in the configuration (trellisctl config use-context NAME)", name)
		}
		ctx = *found
	}
	t := Target{Context: ctx.Name, Namespace: ctx.Namespace, Project: ctx.Project}
	hub := firstSet(flags.Hub, getenv("TRELLIS_HUB"), ctx.Hub, DefaultHub)
	var err error
	if t.Hub, err = NormalizeHub(hub); err != nil {
		return Target{}, err
	}
	sameHub := ctx.Hub != ""
	if sameHub {
		ctxHub, err := NormalizeHub(ctx.Hub)
		sameHub = err == nil && ctxHub == t.Hub
	}
	if !sameHub {
		ctx.CertificateAuthority, ctx.CertificateAuthorityData, ctx.Token = "", nil, ""
	}
	t.Token = firstSet(flags.Token, getenv("TRELLIS_TOKEN"), ctx.Token)
	if caFile := firstSet(flags.CA, getenv("TRELLIS_CA")); caFile != "" {
		t.CA, err = readCA(caFile)
	} else if ctx.CertificateAuthorityData != nil {
		t.CA = ctx.CertificateAuthorityData
	} else if ctx.CertificateAuthority != "" {
		t.CA, err = readCA(ctx.CertificateAuthority)
	}
	if err != nil {
		return Target{}, err
	}
	if flags.Namespace != "" || flags.Project != "" {
		t.Namespace, t.Project = flags.Namespace, flags.Project
	}
	return t, nil
}

func readCA(path string) ([]byte, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the hub's CA: %w", err)
	}
	return pem, nil
}

// NormalizeHub returns a hub address as https://host:port: host:port means https (the hub serves TLS only).
func NormalizeHub(hub string) (string, error) {
	hub = strings.TrimRight(strings.TrimSpace(hub), "/")
	if strings.HasPrefix(hub, "http://") {
		return "", fmt.Errorf("hub %q: the hub serves TLS only; use https://", hub)
	}
	if !strings.Contains(hub, "://") {
		hub = "https://" + hub
	}
	if !strings.HasPrefix(hub, "https://") || len(hub) == len("https://") || strings.ContainsAny(hub[len("https://"):], "/?#") {
		return "", fmt.Errorf("hub %q: want host:port or https://host:port", hub)
	}
	return hub, nil
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
