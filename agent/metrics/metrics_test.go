package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// TestClientGoReportsToRegistry: a named client-go work queue and a REST client's request show up in Registry with
// controller-runtime's names and labels.
func TestClientGoReportsToRegistry(t *testing.T) {
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "metrics-test"})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	if got := value(t, "workqueue_adds_total", `controller="metrics-test",name="metrics-test"`); got != 2 {
		t.Errorf("workqueue_adds_total = %v, want 2", got)
	}
	if got := value(t, "workqueue_depth", `controller="metrics-test",name="metrics-test",priority=""`); got != 2 {
		t.Errorf("workqueue_depth = %v, want 2", got)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer srv.Close()
	rc, err := rest.UnversionedRESTClientFor(&rest.Config{Host: srv.URL,
		ContentConfig: rest.ContentConfig{NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Get().AbsPath("/healthz").Do(context.Background()).Error()
	labels := `code="418",host="` + strings.TrimPrefix(srv.URL, "http://") + `",method="GET"`
	if got := value(t, "rest_client_requests_total", labels); got != 1 {
		t.Errorf("rest_client_requests_total{%s} = %v, want 1", labels, got)
	}
}

// value is the value of the counter or gauge series of Registry named name with labels (as name{labels} prints
// them, sorted by name); -1 when there is none.
func value(t *testing.T, name, labels string) float64 {
	t.Helper()
	families, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var l []string
			for _, p := range m.GetLabel() {
				l = append(l, p.GetName()+`="`+p.GetValue()+`"`)
			}
			if strings.Join(l, ",") != labels {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
