package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math"
	"net"
	"regexp"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MinValidity is the shortest client certificate validity that may be requested (Gardener's and Kubernetes'
// minimum for CSR expirationSeconds).
const MinValidity = 10 * time.Minute

// Validate reports every invalid field of a defaulted configuration; each error names its field path.
func (c *AgentConfiguration) Validate() error {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	errs = append(errs, c.HubClientConnection.validate(field.NewPath("hubClientConnection"))...)
	errs = append(errs, validateSeed(c.SeedConfig, field.NewPath("seedConfig"))...)
	if hb := c.HeartbeatIntervalSeconds; hb < 1 || hb > 300 {
		errs = append(errs, field.Invalid(field.NewPath("heartbeatIntervalSeconds"), hb, "must be between 1 and 300"))
	}
	errs = append(errs, c.ReconnectBackoff.validate(field.NewPath("reconnectBackoff"))...)
	errs = append(errs, c.Controllers.validate(field.NewPath("controllers"))...)
	if q := c.SeedClientConnection.QPS; q != nil && *q <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("seedClientConnection", "qps"), *q, "must be positive"))
	}
	if b := c.SeedClientConnection.Burst; b != nil && *b < 1 {
		errs = append(errs, field.Invalid(field.NewPath("seedClientConnection", "burst"), *b, "must be at least 1"))
	}
	for _, e := range []struct{ name, addr string }{{"healthProbes", c.Server.HealthProbes}, {"metrics", c.Server.Metrics}} {
		if _, _, err := net.SplitHostPort(e.addr); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("server", e.name), e.addr, "must be host:port"))
		}
	}
	if r := c.Tracing.SamplingRatio; r != nil && (*r < 0 || *r > 1) {
		errs = append(errs, field.Invalid(field.NewPath("tracing", "samplingRatio"), *r, "must be between 0 and 1"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("logLevel"), c.LogLevel, []string{"debug", "info", "warn", "error"}))
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("logFormat"), c.LogFormat, []string{"json", "text"}))
	}
	return errs.ToAggregate()
}

func (h *HubClientConnection) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Address == "" {
		errs = append(errs, field.Required(p.Child("address"), "host:port of the hub"))
	} else if err := checkAddress(h.Address); err != nil {
		errs = append(errs, field.Invalid(p.Child("address"), h.Address, err.Error()))
	}
	if h.CAFile != "" && h.CABundle != "" {
		errs = append(errs, field.Forbidden(p.Child("caBundle"), "set caFile or caBundle, not both"))
	}
	if h.CABundle != "" {
		if err := checkPEMCertificates([]byte(h.CABundle)); err != nil {
			errs = append(errs, field.Invalid(p.Child("caBundle"), "<PEM>", err.Error()))
		}
	}
	if h.BootstrapToken != "" && h.BootstrapTokenFile != "" {
		errs = append(errs, field.Forbidden(p.Child("bootstrapTokenFile"), "set bootstrapToken or bootstrapTokenFile, not both"))
	}
	if h.BootstrapToken != "" {
		if err := checkToken(h.BootstrapToken); err != nil {
			errs = append(errs, field.Invalid(p.Child("bootstrapToken"), "<redacted>", err.Error()))
		}
	}
	sp := p.Child("kubeconfigSecret")
	for _, msg := range validation.IsDNS1123Label(h.KubeconfigSecret.Namespace) {
		errs = append(errs, field.Invalid(sp.Child("namespace"), h.KubeconfigSecret.Namespace, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(h.KubeconfigSecret.Name) {
		errs = append(errs, field.Invalid(sp.Child("name"), h.KubeconfigSecret.Name, msg))
	}
	vp := p.Child("kubeconfigValidity")
	v := h.KubeconfigValidity
	if d := duration(v.Validity); d < MinValidity {
		errs = append(errs, field.Invalid(vp.Child("validity"), d.String(), "must be at least "+MinValidity.String()))
	} else if d > math.MaxInt32*time.Second {
		errs = append(errs, field.Invalid(vp.Child("validity"), d.String(), "must be at most "+(math.MaxInt32*time.Second).String()))
	}
	lo, hi := v.AutoRotationJitterPercentageMin, v.AutoRotationJitterPercentageMax
	if lo == nil || *lo < 1 || *lo > 100 {
		errs = append(errs, field.Invalid(vp.Child("autoRotationJitterPercentageMin"), deref(lo), "must be between 1 and 100"))
	}
	if hi == nil || *hi < 1 || *hi > 100 {
		errs = append(errs, field.Invalid(vp.Child("autoRotationJitterPercentageMax"), deref(hi), "must be between 1 and 100"))
	}
	if lo != nil && hi != nil && *lo > *hi {
		errs = append(errs, field.Invalid(vp.Child("autoRotationJitterPercentageMin"), *lo, "must not exceed autoRotationJitterPercentageMax"))
	}
	return errs
}

func (b *ReconnectBackoff) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	initial, maxDelay, reset := duration(b.InitialDelay), duration(b.MaxDelay), duration(b.ResetAfter)
	if initial <= 0 {
		errs = append(errs, field.Invalid(p.Child("initialDelay"), initial.String(), "must be positive"))
	}
	if maxDelay < initial {
		errs = append(errs, field.Invalid(p.Child("maxDelay"), maxDelay.String(), "must not be less than initialDelay"))
	}
	if reset <= 0 {
		errs = append(errs, field.Invalid(p.Child("resetAfter"), reset.String(), "must be positive"))
	}
	return errs
}

func validateSeed(t SeedTemplate, p *field.Path) field.ErrorList {
	s := t.Seed
	if s == nil {
		return field.ErrorList{field.Required(p, "the Seed to register (metadata and spec)")}
	}
	var errs field.ErrorList
	if v := s.GetApiVersion(); v != "" && v != "core.gardener.cloud/v1beta1" {
		errs = append(errs, field.NotSupported(p.Child("apiVersion"), v, []string{"core.gardener.cloud/v1beta1"}))
	}
	if k := s.GetKind(); k != "" && k != "Seed" {
		errs = append(errs, field.NotSupported(p.Child("kind"), k, []string{"Seed"}))
	}
	name := s.GetMetadata().GetName()
	if name == "" {
		errs = append(errs, field.Required(p.Child("metadata", "name"), "the seed's name"))
	}
	for _, msg := range validation.IsDNS1123Label(name) {
		if name != "" {
			errs = append(errs, field.Invalid(p.Child("metadata", "name"), name, msg))
		}
	}
	if ns := s.GetMetadata().GetNamespace(); ns != "" {
		errs = append(errs, field.Forbidden(p.Child("metadata", "namespace"), "Seeds are cluster-scoped"))
	}
	if s.GetSpec() == nil {
		errs = append(errs, field.Required(p.Child("spec"), "the Seed's spec"))
	}
	if s.Status != nil {
		errs = append(errs, field.Forbidden(p.Child("status"), "the agent reports status itself"))
	}
	return errs
}

func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("must be host:port")
	}
	if host == "" {
		return errors.New("host must not be empty")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("port must be a number between 1 and 65535")
	}
	return nil
}

// bootstrapTokenRE is Kubernetes' bootstrap token format, which the hub uses: "<id>.<secret>", [a-z0-9]{6}.[a-z0-9]{16}.
var bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// checkToken checks the form of a bootstrap token; the hub decides whether it is valid.
func checkToken(tok string) error {
	if !bootstrapTokenRE.MatchString(tok) {
		return errors.New(`must be a bootstrap token "<id>.<secret>" ([a-z0-9]{6}.[a-z0-9]{16})`)
	}
	return nil
}

func checkPEMCertificates(b []byte) error {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificates")
	}
	return nil
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
