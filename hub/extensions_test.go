package hub_test

import (
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestRegisteredExtensionsSeedAndBackups drives --require-registered-extensions through a real hub for Seeds,
// BackupBuckets and BackupEntries: each is refused with 422 naming the unregistered type at its field until a
// ControllerRegistration registers the type as primary for the kind.
func TestRegisteredExtensionsSeedAndBackups(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) {
		c.Controllers = []string{"-shoot-statuslabel"}
		c.DisableScheduler = true
		c.RequireRegisteredExtensions = true
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
	refused := func(path, body, field, msg string) {
		t.Helper()
		code, out := h.Do(t, "POST", path, body)
		if code != 422 {
			t.Fatalf("POST %s: want 422, got %d %s", path, code, out)
		}
		if st := decodeStatus(t, out); !st.hasCause(field) || !strings.Contains(st.Message, msg) {
			t.Errorf("POST %s: want a cause at %s saying %q, got %+v", path, field, msg, st)
		}
	}
	refused(seeds, seed, "spec.provider.type", `given Seed uses non-registered provider type: spec.provider.type ("local")`)
	refused(seeds, seed, "spec.backup.provider", `given Seed uses non-registered backup provider type: spec.backup.provider ("local")`)
	refused(buckets, bucket, "spec.provider.type", `given BackupBucket uses non-registered provider type: spec.provider.type ("local")`)

	mustDo(t, h, 201, "POST", regs, `{"metadata":{"name":"provider-local"},"spec":{"resources":[{"kind":"ControlPlane","type":"local"},
		{"kind":"BackupBucket","type":"local"}]}}`)
	// The backup provider must be registered for BackupEntry too.
	refused(seeds, seed, "spec.backup.provider", `given Seed uses non-registered backup provider type: spec.backup.provider ("local")`)
	mustDo(t, h, 201, "POST", buckets, bucket)
	refused(entries, entry, "spec.bucketName", `given BackupEntry references bucket (spec.bucketName) using non-registered provider type ("local")`)

	mustDo(t, h, 201, "POST", regs, `{"metadata":{"name":"provider-local-entry"},"spec":{"resources":[{"kind":"BackupEntry","type":"local"}]}}`)
	mustDo(t, h, 201, "POST", seeds, seed)
	mustDo(t, h, 201, "POST", entries, entry)
}
