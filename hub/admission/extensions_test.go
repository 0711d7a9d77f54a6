package admission_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

var controllerRegistrationsGR = schema.GroupResource{Group: "core.gardener.cloud", Resource: "controllerregistrations"}

// admitExtensions defaults obj (and old) and runs the kind's admission after validation, as the API server does for a
// create (old nil) or an update, with cfg; it returns the refusal's causes by field (their messages) and the error.
func admitExtensions(t *testing.T, rd admission.Reader, cfg admission.Config, obj, old store.Object) (map[string]string, error) {
	t.Helper()
	ctx := admission.WithConfig(context.Background(), cfg)
	p := plugins.For(obj)
	if p.Default != nil {
		p.Default(obj)
		if old != nil {
			p.Default(old)
		}
	}
	err := p.Admit(ctx, rd, obj, old)
	if err == nil {
		return nil, nil
	}
	var st *apierrors.StatusError
	if !errors.As(err, &st) {
		t.Fatalf("admission answered %T %v, want a status", err, err)
	}
	got := map[string]string{}
	if st.ErrStatus.Details != nil {
		for _, c := range st.ErrStatus.Details.Causes {
			got[c.Field] = c.Message
		}
	}
	return got, err
}

// gardenerForbidden is the message gardener-apiserver answers when the ExtensionValidator refuses obj of resource with
// msgs: apiserver's Forbidden around hashicorp/go-multierror's list.
func gardenerForbidden(resource, name string, msgs ...string) string {
	list := fmt.Sprintf("1 error occurred:\n\t* %s\n\n", strings.Join(msgs, ""))
	if len(msgs) > 1 {
		list = fmt.Sprintf("%d errors occurred:\n\t* %s\n\n", len(msgs), strings.Join(msgs, "\n\t* "))
	}
	return fmt.Sprintf("%s.core.gardener.cloud %q is forbidden: %s", resource, name, list)
}

// TestShootExtensionsRegistered: a shoot's provider, networking, primary DNS, extension, container runtime and
// operating system types must be registered as primary by a ControllerRegistration (Gardener's ExtensionValidator,
// on by default), each refusal 403 Forbidden naming its field in Gardener's words; an update that leaves the spec
// alone and a hub with AllowUnregisteredExtensions are not checked.
func TestShootExtensionsRegistered(t *testing.T) {
	r, base := shootGarden(t)
	base = with(base, func(s *corev1beta1.Shoot) {
		s.Spec.Networking.Type = ptr("calico")
		s.Spec.Extensions = []*corev1beta1.Extension{{Type: "shoot-dns-service"}}
		s.Spec.Provider.Workers[0].Cri = &corev1beta1.CRI{Name: "containerd", ContainerRuntimes: []*corev1beta1.ContainerRuntime{{Type: "gvisor"}}}
		s.Spec.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{{Type: ptr("aws-route53"), Primary: ptr(true)}, {Type: ptr("unmanaged"), Primary: ptr(true)}}}
	})
	provider := base.GetSpec().GetProvider().GetType()
	image := base.GetSpec().GetProvider().GetWorkers()[0].GetMachine().GetImage().GetName()
	if provider == "" || image == "" {
		t.Fatalf("the example shoot has no provider type or machine image: %v", base.GetSpec().GetProvider())
	}
	res := func(kind, typ string) *corev1beta1.ControllerResource {
		return &corev1beta1.ControllerResource{Kind: kind, Type: typ}
	}
	all := []*corev1beta1.ControllerResource{res("ControlPlane", provider), res("Infrastructure", provider), res("Worker", provider),
		res("Network", "calico"), res("DNSRecord", "aws-route53"), res("Extension", "shoot-dns-service"), res("ContainerRuntime", "gvisor"),
		res("OperatingSystemConfig", image)}
	registered := func(resources ...*corev1beta1.ControllerResource) admission.Reader {
		// Only this registration: the examples' own are left out.
		others := slices.DeleteFunc(slices.Clone(r), func(e example) bool { return e.gr == controllerRegistrationsGR })
		reg := &corev1beta1.ControllerRegistration{Metadata: meta("ext", ""), Spec: &corev1beta1.ControllerRegistrationSpec{Resources: resources}}
		return replaced(others, controllerRegistrationsGR, reg)
	}
	admit := func(rd admission.Reader, allow bool, obj, old *corev1beta1.Shoot) map[string]string {
		t.Helper()
		var o store.Object
		if old != nil {
			o = old
		}
		got, _ := admitExtensions(t, rd, admission.Config{AllowUnregisteredExtensions: allow}, obj, o)
		return got
	}
	if got := admit(registered(all...), false, clone(base), nil); len(got) != 0 {
		t.Errorf("everything registered: %v", got)
	}
	got := admit(registered(), false, clone(base), nil)
	want := map[string]string{
		"spec.provider.type":                                     `given Shoot uses non-registered provider type: spec.provider.type ("` + provider + `")`,
		"spec.networking.type":                                   `given Shoot uses non-registered networking type: spec.networking.type ("calico")`,
		"spec.dns.providers[0].type":                             `given Shoot uses non-registered extension type: spec.dns.providers[0].type ("aws-route53")`,
		"spec.extensions[0].type":                                `given Shoot uses non-registered extension type: spec.extensions[0].type ("shoot-dns-service")`,
		"spec.provider.workers[0].cri.containerRuntimes[0].type": `given Shoot uses non-registered container runtime type: spec.provider.workers[0].cri.containerRuntimes[0].type ("gvisor")`,
		"spec.provider.workers[0].machine.image.name":            `given Shoot uses non-registered operating system type: spec.provider.workers[0].machine.image.name ("` + image + `")`,
	}
	for f, msg := range want {
		if got[f] != msg {
			t.Errorf("nothing registered: %s: want %q, got %q", f, msg, got[f])
		}
	}
	if len(got) != len(want) {
		t.Errorf("nothing registered: got %v", got)
	}
	// A resource registered with primary: false does not count.
	notPrimary := append([]*corev1beta1.ControllerResource{}, all[:len(all)-1]...)
	osc := res("OperatingSystemConfig", image)
	osc.Primary = ptr(false)
	if got := admit(registered(append(notPrimary, osc)...), false, clone(base), nil); len(got) != 1 || got["spec.provider.workers[0].machine.image.name"] == "" {
		t.Errorf("operating system registered as not primary: %v", got)
	}
	// The answer is Gardener's: 403, the refusals listed in go-multierror's format.
	_, err := admitExtensions(t, registered(all[1:]...), admission.Config{}, with(base, func(s *corev1beta1.Shoot) { s.Metadata.Name = "crazy" }), nil)
	if want := gardenerForbidden("shoots", "crazy", want["spec.provider.type"]); !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("provider type not registered for ControlPlane: got %v, want 403 %q", err, want)
	}
	// An update leaving the spec as it was, and a hub with AllowUnregisteredExtensions, are not checked.
	if got := admit(registered(), false, clone(base), clone(base)); len(got) != 0 {
		t.Errorf("unchanged spec: %v", got)
	}
	if got := admit(registered(), true, clone(base), nil); len(got) != 0 {
		t.Errorf("with AllowUnregisteredExtensions: %v", got)
	}
}

// TestSeedAndBackupExtensionsRegistered: by default a Seed's provider type (ControlPlane), backup
// provider (BackupBucket and BackupEntry) and, with an ingress, DNS provider (DNSRecord), a BackupBucket's provider
// type and the provider type of a BackupEntry's bucket must be registered as primary, each refusal in Gardener's words
// at its field; unchanged specs and a hub without the option are not checked.
func TestSeedAndBackupExtensionsRegistered(t *testing.T) {
	res := func(kind, typ string) *corev1beta1.ControllerResource {
		return &corev1beta1.ControllerResource{Kind: kind, Type: typ}
	}
	bucketsGR := schema.GroupResource{Group: "core.gardener.cloud", Resource: "backupbuckets"}
	bucket := &corev1beta1.BackupBucket{Metadata: meta("bucket", ""), Spec: &corev1beta1.BackupBucketSpec{
		Provider:       &corev1beta1.BackupBucketProvider{Type: "s3", Region: "eu"},
		SeedName:       ptr("aws"),
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "c", Namespace: "garden"},
	}}
	reader := func(resources ...*corev1beta1.ControllerResource) admission.Reader {
		reg := &corev1beta1.ControllerRegistration{Metadata: meta("ext", ""), Spec: &corev1beta1.ControllerRegistrationSpec{Resources: resources}}
		return exampleReader{{gr: controllerRegistrationsGR, obj: reg}, {gr: bucketsGR, obj: bucket}}
	}
	seed := exampleOf[*corev1beta1.Seed](t, exampleReader(examples(t)), seedsGR)
	seed.Spec.Provider.Type = "aws"
	seed.Spec.Backup = &corev1beta1.Backup{Provider: "s3", Region: ptr("eu"), CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "c", Namespace: "garden"}}
	seed.Spec.Ingress = &corev1beta1.Ingress{Domain: "ingress.example.com", Controller: &corev1beta1.IngressController{Kind: "nginx"}}
	seed.Spec.Dns = &corev1beta1.SeedDNS{Provider: &corev1beta1.SeedDNSProvider{Type: "aws-route53", CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "d", Namespace: "garden"}}}
	entry := &corev1beta1.BackupEntry{Metadata: meta("entry", "shoot--dev--a"), Spec: &corev1beta1.BackupEntrySpec{BucketName: "bucket", SeedName: ptr("aws")}}
	all := []*corev1beta1.ControllerResource{res("ControlPlane", "aws"), res("BackupBucket", "s3"), res("BackupEntry", "s3"), res("DNSRecord", "aws-route53")}
	backupOnly := res("BackupEntry", "s3")
	backupOnly.Primary = ptr(false)

	for _, c := range []struct {
		name     string
		r        admission.Reader
		allow    bool
		obj, old store.Object
		want     map[string]string
		notFound bool
	}{
		{name: "seed, all registered", r: reader(all...), obj: clone(seed)},
		{name: "seed, none registered", r: reader(), obj: clone(seed), want: map[string]string{
			"spec.provider.type":     `given Seed uses non-registered provider type: spec.provider.type ("aws")`,
			"spec.backup.provider":   `given Seed uses non-registered backup provider type: spec.backup.provider ("s3")`,
			"spec.dns.provider.type": `given Seed uses non-registered extension type: spec.dns.provider.type ("aws-route53")`,
		}},
		{name: "seed, backup entry not primary", r: reader(append(slices.Clone(all[:2]), backupOnly, all[3])...), obj: clone(seed), want: map[string]string{
			"spec.backup.provider": `given Seed uses non-registered backup provider type: spec.backup.provider ("s3")`,
		}},
		{name: "seed without ingress needs no DNSRecord", r: reader(all[:3]...), obj: with(seed, func(s *corev1beta1.Seed) { s.Spec.Ingress = nil })},
		{name: "seed, unchanged spec", r: reader(), obj: clone(seed), old: clone(seed)},
		{name: "seed, changed spec", r: reader(), obj: with(seed, func(s *corev1beta1.Seed) { s.Spec.Backup = nil; s.Spec.Ingress = nil }), old: clone(seed), want: map[string]string{
			"spec.provider.type": `given Seed uses non-registered provider type: spec.provider.type ("aws")`,
		}},
		{name: "seed, allowed", r: reader(), allow: true, obj: clone(seed)},
		{name: "bucket, registered", r: reader(all...), obj: clone(bucket)},
		{name: "bucket, not registered", r: reader(res("BackupEntry", "s3")), obj: clone(bucket), want: map[string]string{
			"spec.provider.type": `given BackupBucket uses non-registered provider type: spec.provider.type ("s3")`,
		}},
		{name: "bucket, unchanged spec", r: reader(), obj: clone(bucket), old: clone(bucket)},
		{name: "bucket, allowed", r: reader(), allow: true, obj: clone(bucket)},
		{name: "entry, registered", r: reader(all...), obj: clone(entry)},
		{name: "entry, not registered", r: reader(res("BackupBucket", "s3")), obj: clone(entry), want: map[string]string{
			"spec.bucketName": `given BackupEntry references bucket (spec.bucketName) using non-registered provider type ("s3")`,
		}},
		{name: "entry, missing bucket", r: reader(all...), obj: with(entry, func(e *corev1beta1.BackupEntry) { e.Spec.BucketName = "nope" }), notFound: true},
		{name: "entry, unchanged spec", r: reader(), obj: clone(entry), old: clone(entry)},
		{name: "entry, allowed", r: reader(), allow: true, obj: clone(entry)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := admitExtensions(t, c.r, admission.Config{AllowUnregisteredExtensions: c.allow}, c.obj, c.old)
			switch {
			case c.notFound:
				if !apierrors.IsNotFound(err) {
					t.Fatalf("want 404 for the missing bucket, got %v", err)
				}
				return
			case len(c.want) == 0:
				if err != nil {
					t.Fatalf("want no refusal, got %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("want 403, got %v", err)
			}
			if len(got) != len(c.want) {
				t.Errorf("got causes %v, want %v", got, c.want)
			}
			for f, msg := range c.want {
				if got[f] != msg {
					t.Errorf("%s: want %q, got %q", f, msg, got[f])
				}
				if !strings.Contains(err.Error(), "\t* "+msg+"\n") {
					t.Errorf("the message %q does not list %q", err.Error(), msg)
				}
			}
		})
	}
}
