package hub_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trellis-dev/trellis/hub"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// refusedExtension posts body to path and wants Gardener's ExtensionValidator answer: 403 Forbidden, the message
// listing msg, a cause at field.
func refusedExtension(t *testing.T, h *hubtest.Hub, path, body, field, msg string) {
	t.Helper()
	code, out := h.Do(t, "POST", path, body)
	if code != 403 {
		t.Fatalf("POST %s: want 403, got %d %s", path, code, out)
	}
	if st := decodeStatus(t, out); st.Reason != "Forbidden" || !st.hasCause(field) || !strings.Contains(st.Message, "\t* "+msg+"\n") {
		t.Errorf("POST %s: want Forbidden with a cause at %s, the message listing %q, got %+v", path, field, msg, st)
	}
}

// TestRegisteredExtensionsSeedAndBackups drives Gardener's ExtensionValidator (on by default) through a real hub for
// Seeds, BackupBuckets and BackupEntries: each is refused with 403 naming the unregistered type at its field until a
// ControllerRegistration registers the type as primary for the kind.
func TestRegisteredExtensionsSeedAndBackups(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) {
		c.Controllers = []string{"-shoot-statuslabel"}
		c.DisableScheduler = true
	})
	const (
		seeds   = "/apis/core.gardener.cloud/v1beta1/seeds"
		buckets = "/apis/core.gardener.cloud/v1beta1/backupbuckets"
		entries = "/apis/core.gardener.cloud/v1beta1/namespaces/garden/backupentries"
		regs    = "/apis/core.gardener.cloud/v1beta1/controllerregistrations"
	)
	seed := `{"metadata":{"name":"s1"},"spec":{"provider":{"type":"local","region":"local"},"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{},
		"backup":{"provider":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"b","namespace":"garden"}}}}`
	bucket := `{"metadata":{"name":"b1"},"spec":{"provider":{"type":"local","region":"local"},"seedName":"s1",
		"credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"b","namespace":"garden"}}}`
	entry := `{"metadata":{"name":"e1","namespace":"garden"},"spec":{"bucketName":"b1","seedName":"s1"}}`
	refusedExtension(t, h, seeds, seed, "spec.provider.type", `given Seed uses non-registered provider type: spec.provider.type ("local")`)
	refusedExtension(t, h, seeds, seed, "spec.backup.provider", `given Seed uses non-registered backup provider type: spec.backup.provider ("local")`)
	refusedExtension(t, h, buckets, bucket, "spec.provider.type", `given BackupBucket uses non-registered provider type: spec.provider.type ("local")`)
	// A BackupEntry of a bucket that does not exist: 404, as Gardener's lister answers.
	mustDo(t, h, 404, "POST", entries, entry)

	mustDo(t, h, 201, "POST", regs, `{"metadata":{"name":"provider-local"},"spec":{"resources":[{"kind":"ControlPlane","type":"local"},
		{"kind":"BackupBucket","type":"local"}]}}`)
	// The backup provider must be registered for BackupEntry too.
	refusedExtension(t, h, seeds, seed, "spec.backup.provider", `given Seed uses non-registered backup provider type: spec.backup.provider ("local")`)
	mustDo(t, h, 201, "POST", buckets, bucket)
	refusedExtension(t, h, entries, entry, "spec.bucketName", `given BackupEntry references bucket (spec.bucketName) using non-registered provider type ("local")`)

	mustDo(t, h, 201, "POST", regs, `{"metadata":{"name":"provider-local-entry"},"spec":{"resources":[{"kind":"BackupEntry","type":"local"}]}}`)
	mustDo(t, h, 201, "POST", seeds, seed)
	mustDo(t, h, 201, "POST", entries, entry)
}

// TestRegisteredExtensionsShoot: a shoot naming a networking type and an extension no ControllerRegistration registers
// is refused with 403 over REST, the message listing both in Gardener's words and a cause at each field, and with
// PermissionDenied over gRPC; registered, it is created. A hub with AllowUnregisteredExtensions accepts it.
func TestRegisteredExtensionsShoot(t *testing.T) {
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-statuslabel"), func(c *hub.Config) { c.DisableScheduler = true })
	garden(t, h)
	body := strings.Replace(shoot("ext", "garden-dev", "1.35.4"), `"type":"calico"`, `"type":"cilium"`, 1)
	body = strings.Replace(body, `"networking":`, `"extensions":[{"type":"shoot-dns-service"}],"networking":`, 1)
	refusedExtension(t, h, shoots, body, "spec.networking.type", `given Shoot uses non-registered networking type: spec.networking.type ("cilium")`)
	code, out := h.Do(t, "POST", shoots, body)
	st := decodeStatus(t, out)
	if code != 403 || !st.hasCause("spec.extensions[0].type") || !strings.HasPrefix(st.Message, `shoots.core.gardener.cloud "ext" is forbidden: 2 errors occurred:`) ||
		!strings.Contains(st.Message, `* given Shoot uses non-registered extension type: spec.extensions[0].type ("shoot-dns-service")`) {
		t.Errorf("want 403 listing both refusals in Gardener's format, got %d %+v", code, st)
	}

	var s corev1beta1.Shoot
	if err := protojson.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	_, err := corev1beta1.NewShootServiceClient(h.GRPC(t)).Create(context.Background(), &s)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "spec.networking.type") {
		t.Errorf("gRPC create: want PermissionDenied naming spec.networking.type, got %v", err)
	}

	h.RegisterExtensions(t, "networking-cilium", "Network/cilium")
	h.RegisterExtensions(t, "shoot-dns-service", "Extension/shoot-dns-service")
	mustDo(t, h, 201, "POST", shoots, body)

	open := hubtest.Start(t, hubtest.WithoutControllers("shoot-statuslabel"), func(c *hub.Config) {
		c.DisableScheduler = true
		c.AllowUnregisteredExtensions = true
	})
	mustDo(t, open, 201, "POST", "/apis/core.gardener.cloud/v1beta1/seeds", `{"metadata":{"name":"anything"},"spec":{"provider":{"type":"unregistered","region":"r"},
		"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{}}}`)
}
