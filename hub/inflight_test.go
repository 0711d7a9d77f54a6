package hub

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestInflightRequestsMakeTheAPIBusy: a REST request being served makes the API busy, for the loops' lane to yield
// to; a watch, which waits more than it works, does not; and the count goes back when the request ends.
func TestInflightRequestsMakeTheAPIBusy(t *testing.T) {
	m := newMetrics()
	var during []bool
	h := m.http(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { during = append(during, m.Busy()) }))
	for _, target := range []string{
		"/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots",
		"/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots?watch=true",
		"/apis/core.gardener.cloud/v1beta1/watch/namespaces/garden-dev/shoots",
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
		if m.Busy() {
			t.Fatalf("%s: the API is still busy after the request", target)
		}
	}
	if want := []bool{true, false, false}; len(during) != 3 || during[0] != want[0] || during[1] != want[1] || during[2] != want[2] {
		t.Fatalf("busy while serving a list, a watch, a /watch/ path: %v, want %v", during, want)
	}
}
