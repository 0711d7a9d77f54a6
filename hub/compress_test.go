package hub_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// rawGet sends a GET with the given headers and returns the answer with its body as sent (not decompressed).
func rawGet(t *testing.T, h *hubtest.Hub, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.Token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.HTTP.Do(req) // an Accept-Encoding of the request's own is not decoded by the transport
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return resp, body
}

// gunzipped checks that an answer is one gzip member with Kubernetes' headers and returns what it holds.
func gunzipped(t *testing.T, resp *http.Response, body []byte) []byte {
	t.Helper()
	if enc := resp.Header.Get("Content-Encoding"); enc != "gzip" {
		t.Fatalf("%s: Content-Encoding %q, want gzip", resp.Request.URL.Path, enc)
	}
	if vary := strings.Join(resp.Header.Values("Vary"), ", "); !strings.Contains(vary, "Accept-Encoding") {
		t.Errorf("Vary %q lacks Accept-Encoding", vary)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %s for %d bytes", cl, len(body))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return out
}

// TestResponseCompression: gets and lists of 128 KiB or more go out gzipped to a client that takes gzip, as
// kube-apiserver's, whether the gateway joins them from the cache's memoized segments (JSON) or they are re-encoded
// (Tables, protobuf); smaller answers, watches and clients that refuse gzip get them as they are.
func TestResponseCompression(t *testing.T) {
	h := hubtest.Start(t)
	mustDo(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"big"}}`)
	const n = 40
	for i := range n {
		// 4 KiB of hex per ConfigMap: compressible as JSON objects are, not a run of one byte.
		var data strings.Builder
		for j := 0; data.Len() < 4096; j++ {
			s := sha256.Sum256(fmt.Appendf(nil, "%d/%d", i, j))
			data.WriteString(hex.EncodeToString(s[:8]))
		}
		mustDo(t, h, 201, "POST", "/api/v1/namespaces/big/configmaps",
			fmt.Sprintf(`{"metadata":{"name":"cm-%02d","labels":{"app":"x"}},"data":{"k":%q}}`, i, data.String()))
	}
	const list = "/api/v1/namespaces/big/configmaps"

	resp, plain := rawGet(t, h, list, "Accept-Encoding", "identity")
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || len(plain) < gateway.CompressThreshold {
		t.Fatalf("identity: Content-Encoding %q, %d bytes (want none, ≥ %d)", enc, len(plain), gateway.CompressThreshold)
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(plain, &l); err != nil || len(l.Items) != n {
		t.Fatalf("list: %v, %d items", err, len(l.Items))
	}

	resp, gz := rawGet(t, h, list, "Accept-Encoding", "gzip, deflate")
	if got := gunzipped(t, resp, gz); !bytes.Equal(got, plain) {
		t.Fatalf("gzipped list decodes to %d bytes, not the %d of the plain one", len(got), len(plain))
	}
	if len(gz) > len(plain)*3/4 { // hex digits: about 4 bits of 8 carry information

		t.Errorf("gzipped list of %d bytes for %d of JSON", len(gz), len(plain))
	}
	// Joined from the cache's segments (no compressor's header: XFL 0), and the same bytes again.
	if gz[8] != 0 {
		t.Errorf("list compressed as it was written (XFL %d), not joined from the memoized segments", gz[8])
	}
	if _, again := rawGet(t, h, list, "Accept-Encoding", "gzip"); !bytes.Equal(again, gz) {
		t.Error("a second gzipped list differs from the first")
	}
	// Each item's segment is made of the very JSON the cache memoized for it, so that the list's CRC is combined from
	// the segments' own (gateway/crc.go), not hashed over the list's 160 KB again.
	cms, _ := h.Registry().Collection(schema.GroupResource{Resource: "configmaps"})
	cm, err := cms.Get(t.Context(), "big", "cm-03")
	if err != nil {
		t.Fatal(err)
	}
	js, ok := h.Registry().ObjectJSON(cm)
	seg, ok2 := h.Registry().ObjectDeflated(cm, gateway.Before{Comma: true})
	if !ok || !ok2 || !seg.MadeOf(js) {
		t.Errorf("the cached ConfigMap's segment (%v) is not made of its memoized JSON (%v)", ok2, ok)
	}
	// After an update, the list holds the new version.
	mustDo(t, h, 200, "PATCH", list+"/cm-07", `{"metadata":{"labels":{"changed":"yes"}}}`)
	resp, gz = rawGet(t, h, list, "Accept-Encoding", "gzip")
	if got := gunzipped(t, resp, gz); !bytes.Contains(got, []byte(`"changed":"yes"`)) {
		t.Error("the gzipped list after a PATCH lacks the change")
	}

	t.Run("refused or small or a watch: as it is", func(t *testing.T) {
		for _, c := range []struct{ path, enc string }{
			{list, "gzip;q=0"},
			{list, "br"},
			{list + "/cm-01", "gzip"},
			{list + "?labelSelector=app%3Dnone", "gzip"},
			{list + "?watch=true&timeoutSeconds=1", "gzip"},
		} {
			resp, body := rawGet(t, h, c.path, "Accept-Encoding", c.enc)
			if enc := resp.Header.Get("Content-Encoding"); enc != "" {
				t.Errorf("GET %s with Accept-Encoding %q: Content-Encoding %q (%d bytes)", c.path, c.enc, enc, len(body))
			}
		}
	})

	t.Run("a large object", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", gateway.CompressThreshold/16+1)
		mustDo(t, h, 201, "POST", "/api/v1/namespaces/big/configmaps", `{"metadata":{"name":"large"},"data":{"k":"`+big+`"}}`)
		_, plain := rawGet(t, h, list+"/large", "Accept-Encoding", "identity")
		resp, gz := rawGet(t, h, list+"/large", "Accept-Encoding", "gzip")
		if got := gunzipped(t, resp, gz); !bytes.Equal(got, plain) {
			t.Fatal("the gzipped object differs from the plain one")
		}
	})

	t.Run("Table", func(t *testing.T) {
		hdr := []string{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "Accept-Encoding", "gzip"}
		resp, gz := rawGet(t, h, list+"?includeObject=Object", hdr...)
		var table struct {
			Kind string            `json:"kind"`
			Rows []json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(gunzipped(t, resp, gz), &table); err != nil || table.Kind != "Table" || len(table.Rows) != n+1 {
			t.Fatalf("gzipped Table: %v, kind %q, %d rows", err, table.Kind, len(table.Rows))
		}
	})

	t.Run("YAML", func(t *testing.T) {
		resp, gz := rawGet(t, h, list, "Accept", "application/yaml", "Accept-Encoding", "gzip")
		if got := gunzipped(t, resp, gz); !bytes.HasPrefix(got, []byte("apiVersion: v1\n")) || !bytes.Contains(got, []byte("name: cm-39")) {
			t.Fatalf("gzipped YAML list starts %q", got[:min(len(got), 40)])
		}
	})

	t.Run("OpenAPI", func(t *testing.T) {
		const doc = "/openapi/v3/apis/core.gardener.cloud/v1beta1"
		_, plain := rawGet(t, h, doc, "Accept-Encoding", "identity")
		resp, gz := rawGet(t, h, doc, "Accept-Encoding", "gzip")
		if got := gunzipped(t, resp, gz); !bytes.Equal(got, plain) || len(plain) < gateway.CompressThreshold {
			t.Fatalf("gzipped OpenAPI document of %d bytes decodes to %d", len(plain), len(got))
		}
	})

	t.Run("protobuf", func(t *testing.T) {
		resp, gz := rawGet(t, h, list, "Accept", "application/vnd.kubernetes.protobuf", "Accept-Encoding", "gzip")
		if got := gunzipped(t, resp, gz); !bytes.HasPrefix(got, []byte("k8s\x00")) {
			t.Fatalf("gzipped protobuf list starts %q", got[:min(len(got), 8)])
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf" {
			t.Errorf("Content-Type %q", ct)
		}
	})
}
