package gateway

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                      false,
		"gzip":                  true,
		"GZip":                  true,
		"x-gzip":                true,
		"gzip, deflate, br":     true,
		"deflate, gzip;q=0.5":   true,
		"gzip;q=0":              false,
		"gzip; q=0.000":         false,
		"gzip;q=0.001":          true,
		"identity":              false,
		"*":                     true,
		"*;q=0":                 false,
		"*, gzip;q=0":           false, // refused by name
		"gzip;q=0, *":           false,
		"gzip;q=bad":            false,
		"gzip;q=2":              false,
		"br;q=1, gzip ; Q=0.8 ": true,
		"gzipped":               false,
		"deflate":               false,
	} {
		if got := AcceptsGzip(header); got != want {
			t.Errorf("AcceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

// FuzzAcceptsGzip: any header value is read without a panic, and only one that names gzip or * can take gzip.
func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "*;q=0.5, gzip;q=0", "deflate, br", "x-gzip;q=1.0;level=3", ";;,,=q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		got := AcceptsGzip(header)
		lower := strings.ToLower(header)
		if got && !strings.Contains(lower, "gzip") && !strings.Contains(lower, "*") {
			t.Fatalf("AcceptsGzip(%q) = true without gzip or *", header)
		}
	})
}

// marshalGzipped is m's answer to msg for a client that takes gzip: what it wrote and what it returned.
func marshalGzipped(m *Marshaler, msg proto.Message) ([]byte, error) {
	rec := httptest.NewRecorder()
	cw := &compressWriter{ResponseWriter: rec}
	rest, err := m.Marshal(&writable{msg: msg, gz: cw})
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 && !cw.pre {
		return nil, fmt.Errorf("%d bytes returned, not precompressed", len(rest))
	}
	return append(rec.Body.Bytes(), rest...), nil
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// gunzipOne decodes data as exactly one gzip member.
func gunzipOne(t testing.TB, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("gzip header: %v", err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip body: %v", err)
	}
	if rest, _ := io.ReadAll(zr); len(rest) > 0 {
		t.Fatalf("%d bytes after the member", len(rest))
	}
	return out
}

// parts makes a list's parts of data: every third after a comma, every second with its segment, made with the part
// before it as the dictionary, as the marshaler does.
func parts(data [][]byte, deflate func(i int) bool) ([]gzipPart, []byte) {
	var ps []gzipPart
	var want, dict []byte
	for i, d := range data {
		p := gzipPart{data: d, comma: i%3 == 1}
		if deflate(i) {
			p.seg = NextSegment(nil, d, Before{Dict: dict, Comma: p.comma, Held: i%2 == 0})
		}
		if p.comma {
			want = append(want, ',')
		}
		want = append(want, d...)
		ps, dict = append(ps, p), d
	}
	return ps, want
}

func TestAppendGzipJoinsSegmentsAndStoredParts(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh{}\":,"[rnd.IntN(13)]
		}
		return b
	}
	for _, sizes := range [][]int{
		{},
		{0},
		{1, 0, 1},
		{70000},               // a stored part split into two blocks
		{100, 9800, 2, 65535}, // exactly one full stored block
		{65536, 131072, 5, 40000, 40000},
	} {
		var data [][]byte
		for _, n := range sizes {
			data = append(data, word(n))
		}
		ps, want := parts(data, func(i int) bool { return i%2 == 1 })
		if got := gunzipOne(t, appendGzip(nil, ps)); !bytes.Equal(got, want) {
			t.Fatalf("sizes %v: decoded %d bytes, want %d", sizes, len(got), len(want))
		}
	}
}

func TestAppendGzipWrongSegmentFailsTheChecksum(t *testing.T) {
	parts := []gzipPart{{data: []byte(`{"a":1}`), seg: NextSegment(nil, []byte(`{"a":2}`), Before{})}}
	zr, err := gzip.NewReader(bytes.NewReader(appendGzip(nil, parts)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(zr); err == nil {
		t.Fatal("a segment of other bytes than its part's decoded without an error")
	}

	// Made of equal bytes in another allocation, its sum is not taken for the part's: the part's bytes are hashed.
	parts[0].seg = NextSegment(nil, []byte(`{"a":1}`), Before{})
	parts[0].seg.sum ^= 1
	if got := gunzipOne(t, appendGzip(nil, parts)); string(got) != `{"a":1}` {
		t.Fatalf("decoded %s", got)
	}
}

// A segment made of the part's own bytes gives the member's CRC from its sum, combined (crc.go): its bytes are not
// hashed again. A wrong sum then shows in the checksum; the right one decodes.
func TestAppendGzipCombinesTheSegmentsSums(t *testing.T) {
	data := [][]byte{[]byte(`{"kind":"List","items":[`), []byte(`{"a":1}`), []byte(`{"b":2}`), []byte(`]}`)}
	ps := []gzipPart{{data: data[0]}, {data: data[1]}, {data: data[2], comma: true}, {data: data[3]}}
	for i := 1; i <= 2; i++ {
		ps[i].seg = NextSegment(nil, data[i], Before{Dict: data[i-1], Comma: ps[i].comma})
	}
	if got, want := gunzipOne(t, appendGzip(nil, ps)), []byte(`{"kind":"List","items":[{"a":1},{"b":2}]}`); !bytes.Equal(got, want) {
		t.Fatalf("decoded %s, want %s", got, want)
	}
	ps[2].seg.sum ^= 1
	zr, err := gzip.NewReader(bytes.NewReader(appendGzip(nil, ps)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(zr); err == nil {
		t.Fatal("a member joined with a segment's wrong sum decoded: the sum was not what made its CRC")
	}
}

// TestHeldDictionaryIsKnownByIdentity: after held bytes, a segment is found again for the same allocation, made again
// for equal bytes in another one, and made again when the allocation it was made after was freed and its address
// given to other bytes (the weak pointer's identity, not the address, is what counts).
func TestHeldDictionaryIsKnownByIdentity(t *testing.T) {
	json := []byte(`{"kind":"ConfigMap","data":{"k":"the item after the dictionary"}}`)
	dict := bytes.Repeat([]byte(`{"kind":"ConfigMap","data":{"k":"held"}}`), 100)
	held := func(d []byte) Before { return Before{Dict: d, Comma: true, Held: true} }
	s := NextSegment(nil, json, held(dict))
	if NextSegment(s, json, held(dict)) != s {
		t.Error("a segment after the same held bytes was made again")
	}
	if NextSegment(s, json, held(bytes.Clone(dict))) == s {
		t.Error("a segment was reused after equal bytes of another allocation")
	}
	if NextSegment(s, json, Before{Dict: dict, Comma: true}) == s {
		t.Error("a segment made after held bytes was reused after hashed ones")
	}

	// Free the dictionary and allocate bytes of its size until one lands at its address.
	const size = 4096
	old := make([]byte, size)
	for i := range old {
		old[i] = 'a'
	}
	addr := uintptr(unsafe.Pointer(&old[0]))
	s = NextSegment(nil, json, held(old))
	old = nil
	tries := 0
	for range 20 {
		runtime.GC()
		batch := make([][]byte, 0, 2048) // held for the round, so that each allocation takes another free slot
		for range cap(batch) {
			tries++
			b := make([]byte, size)
			for i := range b {
				b[i] = 'b'
			}
			if uintptr(unsafe.Pointer(&b[0])) != addr {
				batch = append(batch, b)
				continue
			}
			next := NextSegment(s, json, held(b))
			if next == s {
				t.Fatal("a segment was reused after other bytes at the address of the freed dictionary")
			}
			parts := []gzipPart{{data: b}, {data: json, comma: true, seg: next}}
			if want := append(append(bytes.Clone(b), ','), json...); !bytes.Equal(gunzipOne(t, appendGzip(nil, parts)), want) {
				t.Fatal("the segment made after the new bytes does not decode")
			}
			return
		}
	}
	t.Fatalf("no allocation reused the freed dictionary's address in %d tries", tries)
}

// TestSegmentsOfSimilarObjects: with the item before as dictionary, a list of similar objects compresses about as one
// stream does, and a segment is made again only for another dictionary or comma.
func TestSegmentsOfSimilarObjects(t *testing.T) {
	var data [][]byte
	for i := range 200 {
		data = append(data, fmt.Appendf(nil, `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"shoot-%03d","namespace":"garden-dev","uid":"%08x"},"spec":{"region":"eu-west-%d","kubernetes":{"version":"1.31.%d"}}}`, i, i*7919, i%3, i%7))
	}
	withDict, want := parts(data, func(int) bool { return true })
	var independent []gzipPart
	for _, p := range withDict {
		q := p
		q.seg = NextSegment(nil, p.data, Before{Comma: p.comma})
		independent = append(independent, q)
	}
	a, b := appendGzip(nil, withDict), appendGzip(nil, independent)
	if !bytes.Equal(gunzipOne(t, a), want) || !bytes.Equal(gunzipOne(t, b), want) {
		t.Fatal("a list of segments does not decode to its JSON")
	}
	if len(a)*3 > len(b) {
		t.Errorf("segments with the item before as dictionary: %d bytes, without: %d; want at most a third", len(a), len(b))
	}

	after := func(dict []byte, comma bool) Before { return Before{Dict: dict, Comma: comma} }
	s := NextSegment(nil, data[1], after(data[0], true))
	if NextSegment(s, data[1], after(data[0], true)) != s {
		t.Error("a segment was made again for the same dictionary")
	}
	if NextSegment(s, data[1], after(data[2], true)) == s || NextSegment(s, data[1], after(data[0], false)) == s {
		t.Error("a segment made after other bytes was reused")
	}
	// Listed in turn after two different items (the whole collection, a list by label): both are kept.
	s1 := NextSegment(nil, data[5], after(data[4], true))
	s2 := NextSegment(s1, data[5], after(data[0], true))
	s3 := NextSegment(s2, data[5], after(data[4], true))
	s4 := NextSegment(s3, data[5], after(data[0], true))
	if !bytes.Equal(s3.Bytes(), s1.Bytes()) || !bytes.Equal(s4.Bytes(), s2.Bytes()) || &s3.Bytes()[0] != &s1.Bytes()[0] || &s4.Bytes()[0] != &s2.Bytes()[0] {
		t.Error("a segment made after either of two items in turn was made again")
	}
	if s := NextSegment(s4, data[5], after(data[9], true)); s.alt == nil || &s.alt.Bytes()[0] != &s2.Bytes()[0] || s.alt.alt != nil {
		t.Error("a third dictionary did not keep the latest other segment as the only alt")
	}
	long := bytes.Repeat([]byte("x"), maxDict)
	s = NextSegment(nil, data[1], after(append([]byte("different start"), long...), false))
	if NextSegment(s, data[1], after(append([]byte("another start"), long...), false)) != s {
		t.Error("bytes beyond deflate's window changed the segment")
	}
}

// FuzzAppendGzip: whatever the parts, which of them have segments and after which commas, the member decodes to
// their concatenation.
func FuzzAppendGzip(f *testing.F) {
	f.Add([]byte(`{"kind":"ShootList","items":[{"metadata":{"name":"a"}},{}]}`), uint64(0b1010), uint8(7))
	f.Add([]byte{}, uint64(0), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, deflate uint64, cut uint8) {
		var pieces [][]byte
		for i := 0; ; i++ {
			n := min(len(data), int(cut)%64+i%3)
			pieces, data = append(pieces, data[:n]), data[n:]
			if n == 0 {
				break
			}
		}
		ps, want := parts(pieces, func(i int) bool { return deflate>>(i%64)&1 == 1 })
		if got := gunzipOne(t, appendGzip(nil, ps)); !bytes.Equal(got, want) {
			t.Fatalf("decoded %q, want %q", got, want)
		}
	})
}

func TestCompressWriter(t *testing.T) {
	big := bytes.Repeat([]byte(`{"metadata":{"name":"x"}},`), CompressThreshold/20)
	cases := []struct {
		name           string
		method, path   string
		acceptEncoding string
		handler        func(w http.ResponseWriter, r *http.Request)
		wantGzip       bool
		wantBody       []byte
	}{
		{name: "large answer", method: "GET", path: "/api/v1/configmaps", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(big)))
				_, _ = w.Write(big)
			}, wantGzip: true, wantBody: big},
		{name: "large answer in small writes, sized by Content-Length", method: "GET", path: "/x", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(big)))
				for b := big; len(b) > 0; b = b[min(len(b), 1000):] {
					_, _ = w.Write(b[:min(len(b), 1000)])
				}
			}, wantGzip: true, wantBody: big},
		{name: "small answer", method: "GET", path: "/x", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) }, wantBody: []byte(`{}`)},
		{name: "not accepted", method: "GET", path: "/x", acceptEncoding: "gzip;q=0",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) }, wantBody: big},
		{name: "error status", method: "GET", path: "/x", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(big)
			}, wantBody: big},
		{name: "watch", method: "GET", path: "/x?watch=true", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) }, wantBody: big},
		{name: "not a GET", method: "POST", path: "/x", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) }, wantBody: big},
		{name: "encoded by the handler", method: "GET", path: "/x", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Encoding", "br")
				_, _ = w.Write(big)
			}, wantBody: big},
		{name: "precompressed", method: "GET", path: "/x", acceptEncoding: "gzip",
			handler: func(w http.ResponseWriter, r *http.Request) {
				cw := compressorFor(r)
				if cw == nil {
					panic("no compressor")
				}
				b := appendGzip(nil, []gzipPart{{data: big, seg: NextSegment(nil, big, Before{})}})
				cw.precompressed()
				w.Header().Set("Content-Length", strconv.Itoa(len(b)))
				_, _ = w.Write(b)
			}, wantGzip: true, wantBody: big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			req.Header.Set("Accept-Encoding", c.acceptEncoding)
			rec := httptest.NewRecorder()
			Compress(http.HandlerFunc(c.handler)).ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			enc := rec.Header().Get("Content-Encoding")
			if c.wantGzip {
				if enc != "gzip" || !strings.Contains(rec.Header().Get("Vary"), "Accept-Encoding") {
					t.Fatalf("Content-Encoding %q, Vary %q: want gzip, Accept-Encoding", enc, rec.Header().Get("Vary"))
				}
				if cl := rec.Header().Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
					t.Fatalf("Content-Length %s for %d bytes", cl, len(body))
				}
				body = gunzipOne(t, body)
			} else if enc == "gzip" {
				t.Fatal("compressed")
			}
			if !bytes.Equal(body, c.wantBody) {
				t.Fatalf("body of %d bytes, want %d", len(body), len(c.wantBody))
			}
		})
	}
}

func ExampleAcceptsGzip() {
	fmt.Println(AcceptsGzip("gzip, deflate"), AcceptsGzip("gzip;q=0, *"), AcceptsGzip("identity"))
	// Output: true false false
}

// benchList is a ConfigMapList of n items of about 9 KB of similar JSON each, with memoized JSON and segments as the
// hub's cache keeps them.
func benchList(n int) (*kcorev1.ConfigMapList, *Marshaler) {
	list := &kcorev1.ConfigMapList{ApiVersion: "v1", Kind: "ConfigMapList", Metadata: &metav1.ListMeta{ResourceVersion: "7"}}
	jsonMemo := map[proto.Message][]byte{}
	segMemo := map[proto.Message]*Segment{}
	for i := range n {
		data := map[string]string{}
		for k := range 60 {
			data[fmt.Sprintf("key-%02d", k)] = fmt.Sprintf("value %d of item %d: %x", k, i, i*7919+k)
		}
		cm := &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: "garden-dev",
			Labels: map[string]string{"app": "bench", "group": fmt.Sprint(i % 10)}}, Data: data}
		list.Items = append(list.Items, cm)
		jsonMemo[cm], _ = kjson.Marshal(cm)
	}
	m := &Marshaler{
		ObjectJSON: func(x proto.Message) ([]byte, bool) { b, ok := jsonMemo[x]; return b, ok },
		ObjectDeflated: func(x proto.Message, before Before) (*Segment, bool) {
			s := NextSegment(segMemo[x], jsonMemo[x], before)
			segMemo[x] = s
			return s, true
		},
	}
	return list, m
}

// TestListOfSmallItemsIsCompressedAsOneStream: a list of small items is not joined from segments, whose own overhead
// would outweigh what they save, but handed on plain for Compress to gzip as one stream.
func TestListOfSmallItemsIsCompressedAsOneStream(t *testing.T) {
	list, m := benchList(2000)
	for _, it := range list.Items {
		it.Data = map[string]string{"k": it.GetMetadata().GetName()} // about 120 bytes of JSON each
	}
	want, err := (&Marshaler{}).Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	m.ObjectJSON, m.ObjectDeflated = nil, nil // not memoized: the items changed
	cw := &compressWriter{ResponseWriter: httptest.NewRecorder()}
	got, err := m.Marshal(&writable{msg: list, gz: cw})
	if err != nil || !bytes.Equal(got, want) || cw.pre || len(want) < CompressThreshold {
		t.Fatalf("list of %d bytes of small items: %v, precompressed %v, %d bytes answered", len(want), err, cw.pre, len(got))
	}
}

// TestGzippedListGoesOutAsItIsJoined: a gzipped list is written a chunk at a time while it is joined, so the client
// inflates its first items while the hub joins the rest; the chunks make up the whole member.
func TestGzippedListGoesOutAsItIsJoined(t *testing.T) {
	list, m := benchList(2000)
	plain, err := m.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	w := &chunkRecorder{}
	cw := &compressWriter{ResponseWriter: w}
	rest, err := m.Marshal(&writable{msg: list, gz: cw})
	if err != nil || !cw.pre {
		t.Fatalf("gzipped list: %v, precompressed %v", err, cw.pre)
	}
	if !bytes.Equal(gunzipOne(t, append(w.body, rest...)), plain) {
		t.Fatal("the chunks and the rest do not decode to the list")
	}
	if len(w.writes) < 4 {
		t.Fatalf("%d bytes gzipped went out in %d writes before the rest (%d bytes)", len(w.body)+len(rest), len(w.writes), len(rest))
	}
	for i, n := range w.writes {
		if n < streamChunk || n > 2*streamChunk {
			t.Errorf("write %d of %d bytes; want a chunk of about %d", i, n, streamChunk)
		}
	}
	if len(rest) > 2*streamChunk {
		t.Errorf("%d bytes left for the caller", len(rest))
	}
}

// chunkRecorder is a ResponseWriter that keeps the body and the size of each write.
// TestPlainListGoesOutAsItIsJoined: a large list for a client that takes no gzip is written a chunk at a time as it
// is joined, never as one copy of the whole list; the chunks and the rest are the list's JSON. A small list and a
// single object are one piece, as before.
func TestPlainListGoesOutAsItIsJoined(t *testing.T) {
	list, m := benchList(2000)
	want, err := (&Marshaler{}).Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	w := &chunkRecorder{}
	rest, err := m.Marshal(&writable{msg: list, plain: w})
	if err != nil || !bytes.Equal(append(w.body, rest...), want) {
		t.Fatalf("plain list of %d bytes: %v; the chunks and the rest differ from it", len(want), err)
	}
	if len(w.writes) < len(want)/(2*streamChunk) || len(rest) > 2*streamChunk {
		t.Fatalf("%d bytes went out in %d writes before the rest (%d bytes)", len(want), len(w.writes), len(rest))
	}
	for i, n := range w.writes {
		if n < streamChunk || n > 2*streamChunk {
			t.Errorf("write %d of %d bytes; want a chunk of about %d", i, n, streamChunk)
		}
	}
	small, m := benchList(3)
	w = &chunkRecorder{}
	for _, msg := range []proto.Message{small, small.Items[0]} {
		want, err := (&Marshaler{}).Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Marshal(&writable{msg: msg, plain: w})
		if err != nil || !bytes.Equal(got, want) || len(w.writes) != 0 {
			t.Fatalf("%T of %d bytes: %v, %d writes before the answer, answer equal: %v", msg, len(want), err, len(w.writes), bytes.Equal(got, want))
		}
	}
}

type chunkRecorder struct {
	discardWriter
	body   []byte
	writes []int
}

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.body = append(c.body, p...)
	c.writes = append(c.writes, len(p))
	return len(p), nil
}

// TestGzippedListOfRandomItems: a list whose items barely compress is never larger gzipped than stored blocks of it
// (the compressor stores a block that would not shrink).
func TestGzippedListOfRandomItems(t *testing.T) {
	list, m := benchList(200)
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, it := range list.Items {
		b := make([]byte, 1500)
		for i := range b {
			b[i] = byte('!' + rnd.IntN(90))
		}
		it.Data = map[string]string{"k": strings.ReplaceAll(strings.ReplaceAll(string(b), `"`, "#"), `\`, "#")}
	}
	m.ObjectJSON, m.ObjectDeflated = nil, nil
	want, err := (&Marshaler{}).Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := marshalGzipped(m, list)
	if err != nil || !bytes.Equal(gunzipOne(t, gz), want) {
		t.Fatalf("gzipped list of random items: %v", err)
	}
	if len(gz) > len(want)+len(list.Items)*11+64 {
		t.Errorf("%d bytes gzipped for %d of JSON: more than stored blocks take", len(gz), len(want))
	}
}

// BenchmarkListAnswer: a list of 2,000 items as the gateway answers it, plain and gzipped from memoized segments
// (after a first list has made them); the client's side (TLS, decompression) is not in it.
func BenchmarkListAnswer(b *testing.B) {
	list, m := benchList(2000)
	plain, err := m.Marshal(list)
	if err != nil {
		b.Fatal(err)
	}
	gz, err := marshalGzipped(m, list)
	if err != nil || !bytes.Equal(gunzipOne(b, gz), plain) {
		b.Fatalf("gzipped list: %v", err)
	}
	b.Logf("list of %d bytes, %d gzipped (%.1f×)", len(plain), len(gz), float64(len(plain))/float64(len(gz)))
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			_, _ = m.Marshal(list)
		}
		b.SetBytes(int64(len(plain)))
	})
	b.Run("gzip", func(b *testing.B) {
		c := &writable{msg: list, gz: &compressWriter{ResponseWriter: discardWriter{}}}
		for b.Loop() {
			_, _ = m.Marshal(c)
		}
		b.SetBytes(int64(len(plain)))
	})
}

// A plain list to a ListWriter goes to it as its parts, nothing written: the head (the list's JSON object but items,
// joined with the items as the answer would be) and each item's memoized JSON itself, not a copy. A single object
// still goes out as it is.
func TestPlainListToAListWriter(t *testing.T) {
	for _, n := range []int{0, 3, 2000} {
		list, m := benchList(n)
		want, err := (&Marshaler{}).Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		w := &listCatcher{}
		rest, err := m.Marshal(&writable{msg: list, plain: w})
		if err != nil || len(rest) != 0 || len(w.writes) != 0 || !w.listed || len(w.items) != n {
			t.Fatalf("%d items: %v, %d bytes returned, %d writes, listed %v with %d items", n, err, len(rest), len(w.writes), w.listed, len(w.items))
		}
		joined := append(bytes.TrimSuffix(bytes.Clone(w.head), []byte("}")), `,"items":[`...)
		for i, it := range w.items {
			if i > 0 {
				joined = append(joined, ',')
			}
			joined = append(joined, it...)
			if memo, _ := m.ObjectJSON(list.Items[i]); &memo[0] != &it[0] {
				t.Fatalf("item %d is not the memoized JSON", i)
			}
		}
		if joined = append(joined, "]}"...); !bytes.Equal(joined, want) {
			t.Fatalf("%d items: the parts joined are not the list's JSON:\n%.200s\n%.200s", n, joined, want)
		}
	}
	small, m := benchList(1)
	w := &listCatcher{}
	got, err := m.Marshal(&writable{msg: small.Items[0], plain: w})
	if want, _ := (&Marshaler{}).Marshal(small.Items[0]); err != nil || !bytes.Equal(got, want) || w.listed {
		t.Fatalf("a single object: %v, listed %v", err, w.listed)
	}
}

type listCatcher struct {
	chunkRecorder
	listed bool
	head   []byte
	items  [][]byte
}

func (c *listCatcher) WriteListJSON(head []byte, items [][]byte) {
	c.listed, c.head, c.items = true, head, items
}
