package admission

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/auth"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
)

// prepareCertificateSigningRequest records the requester, as Kubernetes does: spec.username, spec.groups, spec.uid and
// spec.extra always come from the authenticated user, never from the request body, so approvers can trust them.
func prepareCertificateSigningRequest(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) {
	if csr.Spec == nil {
		csr.Spec = &certificatesv1.CertificateSigningRequestSpec{}
	}
	u, _ := auth.UserFrom(ctx)
	csr.Spec.Username, csr.Spec.Groups, csr.Spec.Uid, csr.Spec.Extra = u.Name, u.Groups, "", nil
}

// keyUsages are Kubernetes' certificates/v1 KeyUsage values.
var keyUsages = []string{
	"signing", "digital signature", "content commitment", "key encipherment", "key agreement", "data encipherment",
	"cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth", "client auth", "code signing",
	"email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
	"microsoft sgc", "netscape sgc",
}

// legacyUnknownSigner may not be requested through certificates.k8s.io/v1.
const legacyUnknownSigner = "kubernetes.io/legacy-unknown"

// minExpirationSeconds is the shortest certificate lifetime a CSR may ask for.
const minExpirationSeconds = 600

// validateCertificateSigningRequest checks spec.request (a PEM-encoded CERTIFICATE REQUEST), spec.signerName (a
// qualified <domain>/<path>, not the legacy-unknown signer), spec.usages (at least one, known, unique) and
// spec.expirationSeconds (at least 600). The spec is immutable.
func validateCertificateSigningRequest(_ context.Context, _ Reader, csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	p := field.NewPath("spec")
	spec := csr.GetSpec()
	if spec == nil {
		spec = &certificatesv1.CertificateSigningRequestSpec{}
	}
	var errs field.ErrorList
	rp := p.Child("request")
	if len(spec.GetRequest()) == 0 {
		errs = append(errs, field.Required(rp, "must provide a PEM-encoded certificate request"))
	} else if err := parseCSR(spec.GetRequest()); err != nil {
		errs = append(errs, field.Invalid(rp, "", err.Error()))
	}
	errs = append(errs, signerName(p.Child("signerName"), spec.GetSignerName())...)
	up := p.Child("usages")
	if len(spec.GetUsages()) == 0 {
		errs = append(errs, field.Required(up, "usages must be provided"))
	}
	seen := map[string]bool{}
	for i, u := range spec.GetUsages() {
		switch {
		case !contains(keyUsages, u):
			errs = append(errs, field.NotSupported(up.Index(i), u, keyUsages))
		case seen[u]:
			errs = append(errs, field.Duplicate(up.Index(i), u))
		}
		seen[u] = true
	}
	if e := spec.ExpirationSeconds; e != nil && *e < minExpirationSeconds {
		errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *e, fmt.Sprintf("may not specify a duration less than %d seconds (10 minutes)", minExpirationSeconds)))
	}
	if old != nil {
		os := old.GetSpec()
		errs = append(errs, immutable(rp, string(spec.GetRequest()), string(os.GetRequest()))...)
		errs = append(errs, immutable(p.Child("signerName"), spec.GetSignerName(), os.GetSignerName())...)
		errs = append(errs, immutableList(up, spec.GetUsages(), os.GetUsages())...)
		errs = append(errs, immutable(p.Child("expirationSeconds"), spec.GetExpirationSeconds(), os.GetExpirationSeconds())...)
	}
	return errs
}

// parseCSR requires a PEM block of type CERTIFICATE REQUEST holding a parseable PKCS#10 request.
func parseCSR(b []byte) error {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return fmt.Errorf("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// signerName is Kubernetes' ValidateSignerName: <domain>/<path>, the domain made of DNS labels with at least one dot,
// the path a DNS subdomain.
func signerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if name == legacyUnknownSigner {
		return field.ErrorList{field.Invalid(p, name, legacyUnknownSigner+" is not an allowed signerName in certificates.k8s.io/v1")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || strings.Contains(path, "/") {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(p, domain, validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(p, domain, fmt.Sprintf("validating label %q: %s", l, msg)))
			}
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(p, domain, "should be a domain with at least two segments separated by dots"))
	}
	if maxLen := validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1; len(path) > maxLen {
		errs = append(errs, field.TooLong(p, path, maxLen))
	}
	for _, msg := range validation.IsDNS1123Subdomain(path) {
		errs = append(errs, field.Invalid(p, path, msg))
	}
	return errs
}
