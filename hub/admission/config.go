package admission

import (
	"context"
	"time"
)

// Defaults of Config.
const (
	// DefaultAccessTokenLifetime is how long an AccessToken lives when its create asks for no expiry.
	DefaultAccessTokenLifetime = 90 * 24 * time.Hour
)

// Config is what the hub configures of admission; the API server passes it to the plugins in their context
// (WithConfig). The zero value is the defaults.
type Config struct {
	// AccessTokenDefaultLifetime is the lifetime of an AccessToken created without spec.expirationTimestamp or
	// spec.expirationSeconds (default DefaultAccessTokenLifetime).
	AccessTokenDefaultLifetime time.Duration
	// AccessTokenMaxLifetime, when set, refuses AccessTokens that would live longer.
	AccessTokenMaxLifetime time.Duration
	// AllowUnregisteredExtensions turns off Gardener's ExtensionValidator, which otherwise refuses shoots naming
	// extension types (provider, networking, DNS, extensions, container runtimes, operating systems), seeds (provider,
	// backup, DNS), BackupBuckets and BackupEntries (their bucket's provider) no ControllerRegistration registers
	// (gardener-apiserver's --disable-admission-plugins=ExtensionValidator).
	AllowUnregisteredExtensions bool
	// Now is the clock of token expirations (tests set it); default time.Now.
	Now func() time.Time
}

func (c Config) defaultLifetime() time.Duration {
	if c.AccessTokenDefaultLifetime > 0 {
		return c.AccessTokenDefaultLifetime
	}
	return DefaultAccessTokenLifetime
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

type configKey struct{}

// WithConfig returns ctx carrying c for the plugins.
func WithConfig(ctx context.Context, c Config) context.Context {
	return context.WithValue(ctx, configKey{}, c)
}

// configFrom returns the configuration of ctx, the defaults when it carries none.
func configFrom(ctx context.Context) Config {
	c, _ := ctx.Value(configKey{}).(Config)
	return c
}
