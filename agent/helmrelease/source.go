package helmrelease

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"

	orasregistry "oras.land/oras-go/v2/registry"
)

// Source is where a chart comes from: a ControllerDeployment's helm.rawChart, or its helm.ociRepository. Exactly one
// of RawChart and OCI is set.
type Source struct {
	// RawChart is a chart archive (gzipped tar), already base64-decoded.
	RawChart []byte
	// OCI is a chart in an OCI registry.
	OCI *OCIRepository
	// PullSecret is optional .dockerconfigjson content (a kubernetes.io/dockerconfigjson Secret's data) holding the
	// credentials for the OCI registry; only the entry for the registry's host is used.
	PullSecret []byte
	// CABundle is an optional PEM bundle (a Secret's bundle.crt) trusted, besides the system roots, to verify the
	// OCI registry's TLS certificate.
	CABundle []byte
}

// OCIRepository names a chart in an OCI registry, as ControllerDeployment's helm.ociRepository does: Ref
// ("registry/repository:tag", "registry/repository@sha256:...", or both, with or without "oci://"), or Repository
// with Tag or Digest. Ref wins over the others; Digest wins over Tag, also within Ref.
type OCIRepository struct {
	Ref        string
	Repository string
	Tag        string
	Digest     string
}

// String returns the reference the repository names, for messages.
func (o *OCIRepository) String() string {
	switch {
	case o.Ref != "":
		return o.Ref
	case o.Digest != "":
		return o.Repository + "@" + o.Digest
	default:
		return o.Repository + ":" + o.Tag
	}
}

// ociRef is a parsed OCIRepository.
type ociRef struct {
	host       string // registry host[:port]
	repository string // host/path
	tag        string // with Helm's "+" to "_" done; empty when digest is set
	digest     string
}

// reference returns what Helm's registry client is given: repository:tag or repository@digest.
func (r ociRef) reference() string {
	if r.digest != "" {
		return r.repository + "@" + r.digest
	}
	return r.repository + ":" + r.tag
}

// parse applies Gardener's rules and checks the result with ORAS' reference parser (what Helm's client uses).
func (o *OCIRepository) parse() (ociRef, error) {
	raw := o.Ref
	if raw == "" {
		repo := strings.TrimPrefix(o.Repository, registry.OCIScheme+"://")
		switch {
		case repo == "":
			return ociRef{}, errors.New("OCI repository: neither ref nor repository is set")
		case strings.ContainsAny(repo, "@"):
			return ociRef{}, fmt.Errorf("OCI repository %q: repository must not contain a digest", o.Repository)
		case o.Digest != "":
			raw = repo + "@" + o.Digest
		case o.Tag != "":
			raw = repo + ":" + o.Tag
		default:
			return ociRef{}, fmt.Errorf("OCI repository %q: neither tag nor digest is set", o.Repository)
		}
	}
	return parseOCIRef(raw)
}

// parseOCIRef parses "[oci://]registry/repository[:tag][@digest]". A digest wins over a tag. Helm stores a chart
// version's "+" as "_" in tags, so a tag's "+" is read as "_".
func parseOCIRef(raw string) (ociRef, error) {
	s := strings.TrimPrefix(raw, registry.OCIScheme+"://")
	name, digest, hasDigest := strings.Cut(s, "@")
	if hasDigest {
		// Whatever tag there is is ignored, as Gardener does.
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			name = name[:i]
		}
		s = name + "@" + digest
	} else if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		s = s[:i] + ":" + strings.ReplaceAll(s[i+1:], "+", "_")
	}
	ref, err := orasregistry.ParseReference(s)
	if err != nil {
		return ociRef{}, fmt.Errorf("OCI reference %q: %w", raw, err)
	}
	r := ociRef{host: ref.Registry, repository: ref.Registry + "/" + ref.Repository}
	switch {
	case ref.Reference == "":
		return ociRef{}, fmt.Errorf("OCI reference %q: neither tag nor digest is set", raw)
	case hasDigest:
		d, err := ref.Digest()
		if err != nil {
			return ociRef{}, fmt.Errorf("OCI reference %q: %w", raw, err)
		}
		r.digest = d.String()
	default:
		r.tag = ref.Reference
	}
	return r, nil
}

// Fetch returns the chart archive of src and the archive's digest ("sha256:<hex>"; for an OCI chart that is the
// digest of its chart layer, not of its manifest). A raw chart is returned as is. An OCI chart is pulled with Helm's
// registry client and kept in memory by repository and manifest digest: with a digest it is pulled only when not
// cached; a tag is resolved to its manifest digest on every call, and the archive then served from the cache when
// known. The returned archive may be shared with the cache and must not be modified.
//
// Errors name the reference and carry the registry's answer (unknown tag or digest, 401 for missing or wrong
// credentials, TLS verification failures).
func (m *Manager) Fetch(ctx context.Context, src Source) (archive []byte, digest string, err error) {
	switch {
	case len(src.RawChart) > 0 && src.OCI != nil:
		return nil, "", errors.New("chart source: both rawChart and ociRepository are set")
	case len(src.RawChart) > 0:
		return src.RawChart, archiveDigest(src.RawChart), nil
	case src.OCI != nil:
		c, err := m.fetchOCI(ctx, src)
		if err != nil {
			return nil, "", err
		}
		return c.archive, c.digest, nil
	default:
		return nil, "", errors.New("chart source: neither rawChart nor ociRepository is set")
	}
}

func (m *Manager) fetchOCI(ctx context.Context, src Source) (cachedChart, error) {
	ref, err := src.OCI.parse()
	if err != nil {
		return cachedChart{}, err
	}
	if ref.digest == "" {
		// Resolve the tag (one HEAD of its manifest), then pull by digest, so that a tag moved meanwhile cannot give
		// an archive other than the digest it is cached under.
		client, done, err := m.registryClient(ctx, src, ref.host)
		if err != nil {
			return cachedChart{}, err
		}
		desc, err := client.Resolve(ref.reference())
		done()
		if err != nil {
			return cachedChart{}, fmt.Errorf("resolving OCI chart %s: %w%s", ref.reference(), err, credentialsHint(src, ref.host, err))
		}
		ref.digest, ref.tag = desc.Digest.String(), ""
		m.log.Debug("resolved OCI chart tag", "ref", src.OCI.String(), "digest", ref.digest)
	}

	key := ref.reference()
	if c, ok := m.charts.get(key); ok {
		return c, nil
	}
	// One pull per digest at a time. The pull is shared, so it runs under its own timeout, not under ctx: a caller
	// that gives up does not fail the others, and its pull still fills the cache.
	results := m.pulls.DoChan(key, func() (any, error) {
		if c, ok := m.charts.get(key); ok { // pulled while this call waited to start
			return c, nil
		}
		pullCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.PullTimeout)
		defer cancel()
		c, err := m.pull(pullCtx, src, ref)
		if err != nil {
			return nil, err
		}
		m.charts.add(c)
		return c, nil
	})
	select {
	case r := <-results:
		if r.Err != nil {
			return cachedChart{}, r.Err
		}
		return r.Val.(cachedChart), nil
	case <-ctx.Done():
		return cachedChart{}, fmt.Errorf("pulling OCI chart %s: %w", key, ctx.Err())
	}
}

// pull pulls the chart ref.digest names.
func (m *Manager) pull(ctx context.Context, src Source, ref ociRef) (cachedChart, error) {
	key := ref.reference()
	client, done, err := m.registryClient(ctx, src, ref.host)
	if err != nil {
		return cachedChart{}, err
	}
	defer done()
	res, err := client.Pull(key, registry.PullOptWithChart(true))
	if err != nil {
		return cachedChart{}, fmt.Errorf("pulling OCI chart %s: %w%s", key, err, credentialsHint(src, ref.host, err))
	}
	if res.Manifest.Digest != ref.digest {
		return cachedChart{}, fmt.Errorf("pulling OCI chart %s: registry served manifest %s", key, res.Manifest.Digest)
	}
	if len(res.Chart.Data) == 0 {
		return cachedChart{}, fmt.Errorf("pulling OCI chart %s: empty chart layer", key)
	}
	m.log.Info("pulled OCI chart", "ref", key, "bytes", len(res.Chart.Data))
	return cachedChart{key: key, archive: res.Chart.Data, digest: archiveDigest(res.Chart.Data)}, nil
}

// registryClient returns a Helm registry client for one registry host, bound to ctx, trusting the system roots and
// src.CABundle, authenticating with src.PullSecret's entry for host (if any) and nothing else. done releases its
// connections.
func (m *Manager) registryClient(ctx context.Context, src Source, host string) (c *registry.Client, done func(), err error) {
	var creds *dockerCredentials
	if len(src.PullSecret) > 0 {
		if creds, err = parseDockerConfigJSON(src.PullSecret); err != nil {
			return nil, nil, err
		}
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if len(src.CABundle) > 0 && !roots.AppendCertsFromPEM(src.CABundle) {
		return nil, nil, errors.New("OCI registry CA bundle: no PEM certificate in it")
	}

	var tr *http.Transport
	if m.cfg.RegistryTransport != nil {
		tr = m.cfg.RegistryTransport.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if tr.TLSClientConfig != nil {
		tlsConfig = tr.TLSClientConfig.Clone()
	}
	tlsConfig.RootCAs = roots
	tr.TLSClientConfig = tlsConfig
	httpClient := &http.Client{Transport: &ctxTransport{ctx: ctx, next: tr}}

	hl := registryLog{log: m.log.With("registry", host)}
	authorizer := auth.Client{
		Client: httpClient,
		Cache:  auth.NewCache(),
		Credential: func(_ context.Context, hostport string) (auth.Credential, error) {
			return creds.lookup(hostport), nil
		},
	}
	authorizer.SetUserAgent("trellis-agent")
	c, err = registry.NewClient(
		registry.ClientOptHTTPClient(httpClient),
		registry.ClientOptAuthorizer(authorizer),
		registry.ClientOptWriter(hl),
	)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, fmt.Errorf("OCI registry client for %s: %w", host, err)
	}
	return c, tr.CloseIdleConnections, nil
}

// credentialsHint explains, for the message of err from a registry at host, why no credentials were sent.
func credentialsHint(src Source, host string, err error) string {
	if len(src.PullSecret) == 0 {
		if errors.Is(err, auth.ErrBasicCredentialNotFound) {
			return " (the registry asks for credentials and no pull secret is given)"
		}
		return ""
	}
	creds, perr := parseDockerConfigJSON(src.PullSecret)
	if perr != nil || creds.lookup(host) != auth.EmptyCredential {
		return ""
	}
	return fmt.Sprintf(" (the pull secret has no credentials for %s, only for %s)", host, strings.Join(creds.hosts(), ", "))
}

// archiveDigest is the OCI digest of an archive.
func archiveDigest(archive []byte) string {
	sum := sha256.Sum256(archive)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// dockerCredentials are the entries of a .dockerconfigjson by registry host.
type dockerCredentials struct {
	byHost map[string]auth.Credential
}

// dockerHubHosts are the names Docker Hub goes by; ORAS asks for registry-1.docker.io's credentials.
var dockerHubHosts = []string{"docker.io", "index.docker.io", "registry-1.docker.io"}

// parseDockerConfigJSON reads .dockerconfigjson content: {"auths": {"<registry>": {"auth": base64("user:password")
// | "username", "password" | "identitytoken" | "registrytoken"}}}. Keys may be URLs ("https://host/v1/"); only their
// host counts. As in Kubernetes, "auth" wins over "username"/"password".
func parseDockerConfigJSON(data []byte) (*dockerCredentials, error) {
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("OCI pull secret: not .dockerconfigjson: %w", err)
	}
	if cfg.Auths == nil {
		return nil, errors.New(`OCI pull secret: not .dockerconfigjson: no "auths"`)
	}
	creds := &dockerCredentials{byHost: map[string]auth.Credential{}}
	for key, entry := range cfg.Auths {
		host := registryHost(key)
		if host == "" {
			return nil, fmt.Errorf("OCI pull secret: entry %q names no registry", key)
		}
		c := auth.Credential{
			Username:     entry.Username,
			Password:     entry.Password,
			RefreshToken: entry.IdentityToken,
			AccessToken:  entry.RegistryToken,
		}
		if entry.Auth != "" {
			decoded, err := base64.StdEncoding.DecodeString(entry.Auth)
			if err != nil {
				return nil, fmt.Errorf("OCI pull secret: entry %q: auth is not base64: %w", key, err)
			}
			user, password, ok := strings.Cut(string(decoded), ":")
			if !ok {
				return nil, fmt.Errorf("OCI pull secret: entry %q: auth is not user:password", key)
			}
			c.Username, c.Password = user, password
		}
		if c == auth.EmptyCredential {
			return nil, fmt.Errorf("OCI pull secret: entry %q has no credentials", key)
		}
		creds.byHost[host] = c
	}
	return creds, nil
}

// registryHost returns the host[:port] of a .dockerconfigjson key ("host", "https://host/v1/"), lower-cased.
func registryHost(key string) string {
	s := strings.ToLower(strings.TrimSpace(key))
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	s, _, _ = strings.Cut(s, "/")
	return s
}

// lookup returns the credentials for hostport, or none. A nil receiver has none.
func (d *dockerCredentials) lookup(hostport string) auth.Credential {
	if d == nil {
		return auth.EmptyCredential
	}
	host := strings.ToLower(hostport)
	if c, ok := d.byHost[host]; ok {
		return c
	}
	if slices.Contains(dockerHubHosts, host) {
		for _, alias := range dockerHubHosts {
			if c, ok := d.byHost[alias]; ok {
				return c
			}
		}
	}
	return auth.EmptyCredential
}

// hosts returns the hosts that have credentials, sorted.
func (d *dockerCredentials) hosts() []string {
	var hosts []string
	for h := range d.byHost {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}
