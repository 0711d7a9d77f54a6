package local

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// DNS outputs.
const (
	// DefaultDNSNamespace is where the CoreDNS of provider-local reads its custom entries, as in Gardener.
	DefaultDNSNamespace = "gardener-extension-provider-local-coredns"
	// CoreDNSConfigMap holds one entry per DNSRecord (key <name>.override, '*' spelled "wildcard").
	CoreDNSConfigMap = "coredns-custom"
	// DefaultZone is the zone of records under it when spec.zone is not set.
	DefaultZone = "local.gardener.cloud"
	// DefaultTTL is the TTL of records without spec.ttl, Gardener's default.
	DefaultTTL = 120
)

// dnsRecord writes each record as a CoreDNS server-block snippet into the ConfigMap coredns-custom of the DNS
// namespace (both created when missing): a rewrite for CNAME records, a template answering with the values for A,
// AAAA and TXT records. The entry is "external" state: Migrate keeps it, Delete removes it. Each record patches only
// its own key, so concurrent records never conflict.
type dnsRecord struct {
	seed
	namespace string
}

func (a *dnsRecord) Reconcile(ctx context.Context, log logr.Logger, rec *extensionsv1alpha1.DNSRecord, _ *extsdk.Cluster) error {
	zone := dnsZone(rec)
	if err := a.patchEntry(ctx, dnsKey(rec.Spec.Name), dnsEntry(rec)); err != nil {
		return err
	}
	log.V(1).Info("Wrote DNS entry", "name", rec.Spec.Name, "zone", zone)
	rec.Status.Zone = &zone
	return nil
}

func (a *dnsRecord) Delete(ctx context.Context, _ logr.Logger, rec *extensionsv1alpha1.DNSRecord, _ *extsdk.Cluster) error {
	err := a.c.Patch(ctx, a.configMap(), entryPatch(dnsKey(rec.Spec.Name), nil))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove DNS entry %s: %w", rec.Spec.Name, err)
	}
	return nil
}

// Migrate keeps the entry: like a record in a cloud DNS, it outlives the move to another seed.
func (a *dnsRecord) Migrate(context.Context, logr.Logger, *extensionsv1alpha1.DNSRecord, *extsdk.Cluster) error {
	return nil
}

func (a *dnsRecord) configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: CoreDNSConfigMap, Namespace: a.namespace}}
}

// patchEntry sets key to value with a merge patch, creating the namespace and ConfigMap when missing.
func (a *dnsRecord) patchEntry(ctx context.Context, key, value string) error {
	err := a.c.Patch(ctx, a.configMap(), entryPatch(key, &value))
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return fmt.Errorf("write DNS entry %s: %w", key, err)
		}
		return nil
	}
	if err := a.ensureNamespace(ctx, a.namespace); err != nil {
		return err
	}
	cm := a.configMap()
	cm.Labels = map[string]string{LabelManagedBy: FieldOwner}
	cm.Data = map[string]string{key: value}
	err = a.c.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		err = a.c.Patch(ctx, a.configMap(), entryPatch(key, &value))
	}
	if err != nil {
		return fmt.Errorf("write DNS entry %s: %w", key, err)
	}
	return nil
}

// entryPatch sets data[key] to value, or removes it for nil.
func entryPatch(key string, value *string) client.Patch {
	b, _ := json.Marshal(map[string]any{"data": map[string]*string{key: value}})
	return client.RawPatch(types.MergePatchType, b)
}

// dnsKey is the ConfigMap key of a record's entry.
func dnsKey(name string) string {
	return strings.ReplaceAll(name, "*", "wildcard") + ".override"
}

// dnsZone is spec.zone, else the zone found earlier (status.zone), else DefaultZone for names under it, else the
// name's parent domain.
func dnsZone(rec *extensionsv1alpha1.DNSRecord) string {
	if z := deref(rec.Spec.Zone); z != "" {
		return z
	}
	if z := deref(rec.Status.Zone); z != "" {
		return z
	}
	name := strings.TrimSuffix(rec.Spec.Name, ".")
	if name == DefaultZone || strings.HasSuffix(name, "."+DefaultZone) {
		return DefaultZone
	}
	if _, parent, ok := strings.Cut(name, "."); ok && parent != "" {
		return parent
	}
	return name
}

// dnsEntry renders a record as a CoreDNS snippet.
func dnsEntry(rec *extensionsv1alpha1.DNSRecord) string {
	ttl := int64(DefaultTTL)
	if rec.Spec.TTL != nil {
		ttl = *rec.Spec.TTL
	}
	name := strings.TrimSuffix(rec.Spec.Name, ".")
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(name), `\*`, `[^.]+`) + `\.$`
	var b strings.Builder
	fmt.Fprintf(&b, "# DNSRecord %s/%s: %s %s ttl %d\n", rec.Namespace, rec.Name, rec.Spec.RecordType, name, ttl)
	if rec.Spec.RecordType == extensionsv1alpha1.DNSRecordTypeCNAME && len(rec.Spec.Values) > 0 {
		fmt.Fprintf(&b, "rewrite stop name regex %s %s answer auto\n", re, strings.TrimSuffix(rec.Spec.Values[0], "."))
		return b.String()
	}
	fmt.Fprintf(&b, "template IN %s %s {\n  match %s\n", rec.Spec.RecordType, dnsZone(rec), re)
	for _, v := range rec.Spec.Values {
		if rec.Spec.RecordType == extensionsv1alpha1.DNSRecordTypeTXT {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "  answer \"{{ .Name }} %d IN %s %s\"\n", ttl, rec.Spec.RecordType, strings.ReplaceAll(v, `"`, `\"`))
	}
	b.WriteString("  fallthrough\n}\n")
	return b.String()
}
