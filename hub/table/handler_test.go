package table

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/gateway"
)

// The handler takes a list from the gateway as its parts (gateway.ListWriter), and makes its Table from them; a
// document written as usual (an object) is read as before.
func TestHandlerTakesListParts(t *testing.T) {
	items := [][]byte{
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","creationTimestamp":"2026-11-30T11:00:00Z"},"data":{"k":"v"}}`),
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"ns","creationTimestamp":"2026-11-30T11:30:00Z"}}`),
	}
	now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces/ns/configmaps/a" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(items[0])
			return
		}
		lw, ok := w.(gateway.ListWriter)
		if !ok {
			t.Errorf("the gateway's writer %T takes no list parts", w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		lw.WriteListJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"7"}}`), items)
	})
	h := Handler(next, now)
	for path, want := range map[string][]string{
		"/api/v1/namespaces/ns/configmaps":   {"a", "b"},
		"/api/v1/namespaces/ns/configmaps/a": {"a"},
	} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var tb kmetav1.Table
		if err := json.Unmarshal(rec.Body.Bytes(), &tb); rec.Code != 200 || err != nil || tb.Kind != "Table" {
			t.Fatalf("GET %s: %d, %v: %s", path, rec.Code, err, rec.Body.Bytes())
		}
		if len(tb.Rows) != len(want) {
			t.Fatalf("GET %s: %d rows, want %v", path, len(tb.Rows), want)
		}
		for i, name := range want {
			if tb.Rows[i].Cells[0] != name {
				t.Errorf("GET %s: row %d is %v, want %s", path, i, tb.Rows[i].Cells, name)
			}
		}
		if len(want) == 2 && tb.ResourceVersion != "7" {
			t.Errorf("GET %s: resourceVersion %q, want 7", path, tb.ResourceVersion)
		}
	}
	// The handler keeps what it read of the list's items (Memo): bytes changed in place, which the gateway's items
	// never are, show through only in a new handler.
	items[1][bytes.Index(items[1], []byte(`"name":"b"`))+len(`"name":"`)] = 'c'
	for _, c := range []struct {
		h    http.Handler
		want string
	}{{h, "b"}, {Handler(next, now), "c"}} {
		req := httptest.NewRequest("GET", "/api/v1/namespaces/ns/configmaps", nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		var tb kmetav1.Table
		if err := json.Unmarshal(rec.Body.Bytes(), &tb); err != nil || len(tb.Rows) != 2 || tb.Rows[1].Cells[0] != c.want {
			t.Errorf("a second list: %v %s, want the second row named %s", err, rec.Body.Bytes(), c.want)
		}
	}
}
