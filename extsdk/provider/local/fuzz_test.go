package local

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// FuzzProviderStatusAndState feeds arbitrary JSON to what provider-local decodes from objects others write: the
// infrastructure status forwarded by the agent, and the Worker's status.state restored from a ShootState. Decoding
// never panics and errors name the field.
func FuzzProviderStatusAndState(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"local.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus","network":{"id":"net-1"}}`))
	f.Add([]byte(`{"machines":[{"name":"m-1","deployment":"d"}]}`))
	f.Add([]byte(`{"kind":7}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := parseInfrastructureStatus(&runtime.RawExtension{Raw: raw}); err != nil && !strings.Contains(err.Error(), "infrastructureProviderStatus") {
			t.Fatalf("error does not name the field: %v", err)
		}
		w := &extensionsv1alpha1.Worker{}
		w.Status.State = &runtime.RawExtension{Raw: raw}
		if _, err := workerState(w); err != nil && !strings.Contains(err.Error(), "status.state") {
			t.Fatalf("error does not name the field: %v", err)
		}
	})
}
