package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// lateMapper maps Cluster at once and Worker only from its nth lookup on, as a seed's discovery lists a kind some
// time after its CRD is Established.
type lateMapper struct {
	meta.RESTMapper
	lookups atomic.Int32
	n       int32
}

func (m *lateMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if gk.Kind == "Worker" && m.lookups.Add(1) < m.n {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func newLateMapper(n int32) *lateMapper {
	gv := extensionsv1alpha1.SchemeGroupVersion
	base := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	base.Add(gv.WithKind("Cluster"), meta.RESTScopeRoot)
	base.Add(gv.WithKind("Worker"), meta.RESTScopeNamespace)
	return &lateMapper{RESTMapper: base, n: n}
}

// TestWaitMappedWaitsForDiscovery: the seed side starts its informers only once every kind maps; a kind that never
// does is named in the error after the timeout.
func TestWaitMappedWaitsForDiscovery(t *testing.T) {
	objs := []client.Object{&extensionsv1alpha1.Cluster{}, &extensionsv1alpha1.Worker{}}
	late := newLateMapper(3)
	if err := agent.WaitMapped(t.Context(), late, objs, time.Minute); err != nil {
		t.Fatalf("Worker mapped from the third lookup on: %v", err)
	}
	if got := late.lookups.Load(); got < 3 {
		t.Fatalf("Worker looked up %d times, want at least 3", got)
	}
	never := newLateMapper(1 << 30)
	err := agent.WaitMapped(t.Context(), never, objs, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "[Worker]") {
		t.Fatalf("a kind never served: err = %v, want one naming [Worker]", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := agent.WaitMapped(ctx, never, objs, time.Minute); err == nil {
		t.Fatal("an ended context did not end the wait")
	}
}
