package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
)

// CompressThreshold is the size from which a response goes out gzipped to a client that accepts it:
// kube-apiserver's (APIResponseCompression, on by default, 128 KiB). Smaller answers cost more to compress than they
// save.
const CompressThreshold = 128 << 10

// Compress gzips the answers to GET requests (not watches) that accept gzip (Accept-Encoding) and are at least
// CompressThreshold bytes, as kube-apiserver does: a list of 2,000 shoots is 38 MB of JSON and under 1 MB gzipped,
// which is what a client far from the hub waits for. client-go and kubectl accept gzip unless told not to
// (rest.Config's DisableCompression), and decompress transparently. Lists and gets that the gateway assembles from
// the watch cache go out pre-compressed from each object's memoized deflate segment (see Marshaler.ObjectDeflated),
// so a gzipped list costs the hub less than the plain one; other answers (Tables, protobuf, YAML, lists of small
// items, the OpenAPI documents) are compressed as they are written, at gzip's fastest level as kube-apiserver's.
// Only 200 answers are compressed.
//
// Handlers inside that re-encode the gateway's answer (Tables, protobuf) must take Accept-Encoding off the request
// they hand on, as a proxy would: the gateway pre-compresses only for a request that still accepts gzip.
func Compress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || IsWatch(r) || !AcceptsGzip(r.Header.Get("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &compressWriter{ResponseWriter: w}
		defer cw.finish()
		next.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), compressorKey{}, cw)))
	})
}

// IsWatch reports whether r asks for a watch (?watch=true or a /watch/ path).
func IsWatch(r *http.Request) bool {
	return isTrue(r.URL.Query().Get("watch")) || strings.Contains(r.URL.Path, "/watch/")
}

// AcceptsGzip reports whether an Accept-Encoding header value takes gzip: listed (or "*") with a quality above 0,
// and not refused by name when "*" allows it (RFC 9110, 12.5.3).
func AcceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0 // a malformed quality takes nothing
				}
				q = f
			}
		}
		switch c := strings.ToLower(strings.TrimSpace(coding)); c {
		case "gzip", "x-gzip":
			gzipQ = max(gzipQ, q)
		case "*":
			starQ = max(starQ, q)
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

type compressorKey struct{}

// compressorFor returns the writer of Compress that r's answer reaches unchanged, nil when there is none or r no
// longer accepts gzip (a handler between them re-encodes the answer).
func compressorFor(r *http.Request) *compressWriter {
	cw, _ := r.Context().Value(compressorKey{}).(*compressWriter)
	if cw == nil || !AcceptsGzip(r.Header.Get("Accept-Encoding")) {
		return nil
	}
	return cw
}

// compressWriter decides at its first write whether the answer goes out gzipped: a 200 without a Content-Encoding
// of its own whose size (Content-Length, else the first write) reaches CompressThreshold. An answer the gateway has
// compressed itself (precompressed) passes through.
type compressWriter struct {
	http.ResponseWriter
	code    int
	started bool
	pre     bool
	gz      *gzip.Writer
}

func (c *compressWriter) WriteHeader(code int) {
	if c.started || c.code != 0 {
		return
	}
	if code >= 100 && code < 200 {
		c.ResponseWriter.WriteHeader(code) // informational answers go out at once and are not the answer's
		return
	}
	c.code = code
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if !c.started {
		c.start(len(p))
	}
	if c.gz != nil {
		return c.gz.Write(p)
	}
	return c.ResponseWriter.Write(p)
}

// Flush sends what is written so far (http.Flusher).
func (c *compressWriter) Flush() {
	if !c.started {
		c.start(0)
	}
	if c.gz != nil {
		_ = c.gz.Flush()
	}
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (c *compressWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// precompressed marks the answer as gzipped by its writer: it passes through with its headers set here.
func (c *compressWriter) precompressed() {
	c.pre = true
	h := c.Header()
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
}

func (c *compressWriter) start(n int) {
	c.started = true
	code := c.code
	if code == 0 {
		code = http.StatusOK
	}
	h := c.Header()
	size := n
	if cl, err := strconv.Atoi(h.Get("Content-Length")); err == nil {
		size = cl
	}
	if !c.pre && code == http.StatusOK && h.Get("Content-Encoding") == "" && size >= CompressThreshold {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		h.Del("Content-Length")
		c.gz = gzipWriters.Get().(*gzip.Writer)
		c.gz.Reset(c.ResponseWriter)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *compressWriter) finish() {
	if !c.started {
		if c.code == 0 {
			return // nothing written: net/http answers 200 with no body
		}
		c.start(0)
	}
	if c.gz != nil {
		_ = c.gz.Close()
		c.gz.Reset(nil)
		gzipWriters.Put(c.gz)
		c.gz = nil
	}
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// Segment is an object's piece of a gzipped answer, memoized with the object's JSON (Marshaler.ObjectDeflated): the
// deflate stream of the JSON, after a comma when it follows another item of a list, compressed with the bytes before
// it in the answer (the item before it) as the dictionary. The dictionary is what makes a list of similar objects
// compress as a whole stream does (a list of 2,000 generated shoots: 39× with it, 3× without, and decoding 8× faster
// for the client); the segment is made anew only when the object or the one before it changed. A segment starts at a
// byte boundary and ends with a sync flush (an empty stored block, not final), so segments join into one stream.
type Segment struct {
	after segmentKey // what it was made after
	data  []byte
	// sum is the CRC-32 of the bytes the segment holds compressed (the comma and the JSON), shift x^(8n) for their
	// length n: a gzip member's CRC is combined from its segments' (crc.go). json is the JSON's first byte and n its
	// length: a segment's sum stands for a part's bytes only when it was made of the same allocation (MadeOf).
	sum, shift uint32
	json       *byte
	n          int
	// alt is the segment made before it after other bytes (without an alt of its own): an object is listed after
	// one item in the whole collection and after another in a list by label, and a client that asks for both in
	// turn finds both kept.
	alt *Segment
}

// Bytes returns the segment's part of the deflate stream.
func (s *Segment) Bytes() []byte { return s.data }

// MadeOf reports whether s was made of json itself (the same bytes of the same allocation, which a memoized encoding
// never changes), so that its CRC is json's: the joiner then combines it instead of hashing json again.
func (s *Segment) MadeOf(json []byte) bool { return s.json == firstByte(json) && s.n == len(json) }

// firstByte is the address of b's first byte, nil when it has none.
func firstByte(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}

// Before is what a segment follows in an answer: Dict, the bytes before it, of which the last 32 KiB (deflate's
// window) count; Comma, whether a comma leads the segment; and Held, whether Dict is an object's JSON that is never
// changed while anything refers to it (an encoding the watch cache memoized, or one made for this answer alone; never
// a buffer that is reused). A segment knows held bytes by identity, as one allocation, and others by a hash of their
// content: a list's items are known at the cost of a pointer, not of hashing every item again for every list.
type Before struct {
	Dict  []byte
	Comma bool
	Held  bool
}

// segmentKey is what a segment was made after. held is the dictionary's first byte when it was held: a weak pointer
// compares equal only to one made from the same allocation (at the same offset), also after that allocation was
// freed and its address reused, and it does not keep the bytes alive.
type segmentKey struct {
	held  weak.Pointer[byte]
	sum   uint64 // the dictionary's hash, when not held
	n     int
	comma bool
}

// dictSeed keys segments by their dictionary within this process.
var dictSeed = maphash.MakeSeed()

// maxDict is deflate's window: the bytes before a segment that it can refer to.
const maxDict = 32 << 10

func keyOf(before Before) segmentKey {
	dict := before.Dict[max(0, len(before.Dict)-maxDict):]
	k := segmentKey{n: len(dict), comma: before.Comma}
	if before.Held && len(dict) > 0 {
		k.held = weak.Make(&dict[0])
	} else {
		k.sum = maphash.Bytes(dictSeed, dict)
	}
	return k
}

// NextSegment returns the segment of json after before: memo, or the one it keeps as alt, when made after the same,
// else a new one.
func NextSegment(memo *Segment, json []byte, before Before) *Segment {
	key := keyOf(before)
	if memo != nil {
		if memo.after == key {
			return memo
		}
		if a := memo.alt; a != nil && a.after == key {
			next, alt := *a, *memo
			alt.alt = nil
			next.alt = &alt
			return &next
		}
	}
	var buf bytes.Buffer
	buf.Grow(len(json)/8 + 64)
	fw := flateWriters.Get().(*flate.Writer)
	fw.ResetDict(&buf, before.Dict[max(0, len(before.Dict)-maxDict):])
	if before.Comma {
		_, _ = fw.Write(commaByte) // a bytes.Buffer does not fail
	}
	_, _ = fw.Write(json)
	_ = fw.Flush()
	fw.ResetDict(nil, nil)
	flateWriters.Put(fw)
	seg := &Segment{after: key, data: buf.Bytes(), json: firstByte(json), n: len(json)}
	n := len(json)
	if before.Comma {
		seg.sum = crc32.Update(seg.sum, crc32.IEEETable, commaByte)
		n++
	}
	seg.sum = crc32.Update(seg.sum, crc32.IEEETable, json)
	seg.shift = crcShift(uint64(n))
	if memo != nil {
		alt := *memo
		alt.alt = nil
		seg.alt = &alt
	}
	return seg
}

var commaByte = []byte(",")

// gzipPart is a piece of an answer: its bytes, after a comma if comma, and, when it has one, their Segment's bytes;
// a part without one is stored uncompressed (a list's head and end).
type gzipPart struct {
	comma bool
	data  []byte
	seg   *Segment // data's segment after what comes before it, if it has one; else data goes stored
}

// gzipHeader is a gzip member's header: deflate, no flags, no time, no extra flags, unknown OS (as Go's writer).
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// finalBlock ends a deflate stream: an empty fixed-Huffman block marked final.
var finalBlock = []byte{0x03, 0x00}

// appendGzip appends one gzip member holding the parts' bytes in order, made of their segments and stored blocks
// (RFC 1951 3.2.4) for the parts without one, with the CRC-32 and size of the whole (RFC 1952).
func appendGzip(out []byte, parts []gzipPart) []byte {
	j := gzipJoiner{out: out}
	j.begin()
	for _, p := range parts {
		j.add(p)
	}
	j.end()
	return j.out
}

// gzipJoiner appends one gzip member to out part by part (appendGzip); its owner may take out's bytes away between
// parts, to send the member as it is joined.
type gzipJoiner struct {
	out       []byte
	crc, size uint32
}

func (j *gzipJoiner) begin() { j.out = append(j.out, gzipHeader...) }

func (j *gzipJoiner) add(p gzipPart) {
	if p.comma {
		j.size++
	}
	j.size += uint32(len(p.data)) //nolint:gosec // ISIZE is the size modulo 2^32
	if p.seg != nil && p.seg.MadeOf(p.data) {
		j.crc = crcCombine(j.crc, p.seg.sum, p.seg.shift)
	} else {
		// Of the part's own bytes: a segment made of other bytes then fails the client's check of the CRC instead
		// of passing for the part.
		if p.comma {
			j.crc = crc32.Update(j.crc, crc32.IEEETable, commaByte)
		}
		j.crc = crc32.Update(j.crc, crc32.IEEETable, p.data)
	}
	if p.seg != nil {
		j.out = append(j.out, p.seg.data...)
		return
	}
	if p.comma {
		j.out = appendStored(j.out, commaByte)
	}
	j.out = appendStored(j.out, p.data)
}

func (j *gzipJoiner) end() {
	j.out = append(j.out, finalBlock...)
	j.out = binary.LittleEndian.AppendUint32(j.out, j.crc)
	j.out = binary.LittleEndian.AppendUint32(j.out, j.size)
}

// appendStored appends d as stored blocks of at most 65,535 bytes each.
func appendStored(out, d []byte) []byte {
	for len(d) > 0 {
		n := min(len(d), 0xffff)
		out = append(out, 0) // not final, stored; the rest of the byte pads to the boundary
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
		out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
		out = append(out, d[:n]...)
		d = d[n:]
	}
	return out
}
