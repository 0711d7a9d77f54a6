package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// The apiVersion and kind of the file.
const (
	APIVersion = "trellis.dev/v1alpha1"
	Kind       = "Config"
)

// Config is the configuration file.
type Config struct {
	APIVersion     string    `json:"apiVersion"`
	Kind           string    `json:"kind"`
	CurrentContext string    `json:"current-context,omitempty"`
	Contexts       []Context `json:"contexts,omitempty"`
}

// Context is one named way to reach a hub.
type Context struct {
	Name string `json:"name"`
	// Hub is the hub's address: https://host:port or host:port.
	Hub string `json:"hub,omitempty"`
	// CertificateAuthority is a file holding the hub's CA certificate (PEM); CertificateAuthorityData the PEM
	// itself, which wins. Without either the system's roots verify the hub.
	CertificateAuthority     string `json:"certificate-authority,omitempty"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	// Token is the bearer token.
	Token string `json:"token,omitempty"`
	// Namespace is the default namespace; Project the default project (whose namespace is used), if no namespace.
	Namespace string `json:"namespace,omitempty"`
	Project   string `json:"project,omitempty"`
}

// Path returns the file's location: $TRELLISCONFIG, or .trellis/config in the home directory.
func Path(getenv func(string) string) string {
	if p := getenv("TRELLISCONFIG"); p != "" {
		return p
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".trellis", "config")
}

// maxSize bounds the file Load reads: a configuration is a few kilobytes.
const maxSize = 4 << 20

// Load reads the file at path; a missing file is an empty configuration.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{APIVersion: APIVersion, Kind: Kind}, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads a configuration from YAML or JSON, strictly: unknown fields are errors.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxSize {
		return nil, fmt.Errorf("larger than %d bytes", maxSize)
	}
	c := &Config{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, err
	}
	if c.APIVersion == "" && c.Kind == "" {
		c.APIVersion, c.Kind = APIVersion, Kind
	}
	return c, c.Validate()
}

// Validate checks the file's kind and that context names are set and unique.
func (c *Config) Validate() error {
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return fmt.Errorf("not a trellisctl configuration: apiVersion %q, kind %q (want %s, %s)", c.APIVersion, c.Kind, APIVersion, Kind)
	}
	seen := map[string]bool{}
	for i, ctx := range c.Contexts {
		if ctx.Name == "" {
			return fmt.Errorf("contexts[%d]: the name is missing", i)
		}
		if seen[ctx.Name] {
			return fmt.Errorf("contexts[%d]: the name %q is used twice", i, ctx.Name)
		}
		seen[ctx.Name] = true
	}
	return nil
}

// Save writes the configuration to path with mode 0600 (it holds tokens), atomically, creating the directory.
func (c *Config) Save(path string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".config-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Context returns the context named name.
func (c *Config) Context(name string) (*Context, bool) {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i], true
		}
	}
	return nil, false
}

// SetContext adds ctx or replaces the context of the same name.
func (c *Config) SetContext(ctx Context) {
	if old, ok := c.Context(ctx.Name); ok {
		*old = ctx
		return
	}
	c.Contexts = append(c.Contexts, ctx)
}

// DeleteContext removes the context named name (and unsets it as the current one); it reports whether there was one.
func (c *Config) DeleteContext(name string) bool {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			c.Contexts = append(c.Contexts[:i], c.Contexts[i+1:]...)
			if c.CurrentContext == name {
				c.CurrentContext = ""
			}
			return true
		}
	}
	return false
}
