package tunnelwire

import (
	"bytes"
	"strings"
	"testing"
)

func TestDataPreface(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 2)
	token := bytes.Repeat([]byte{0xa5}, DataTokenLen)
	b, err := DataPreface(id, token)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != DataPrefaceLen || b[0] == 0x16 {
		t.Fatalf("preface %q: %d bytes", b, len(b))
	}
	gotID, gotToken, err := ParseDataPreface(b)
	if err != nil || gotID != id || !bytes.Equal(gotToken, token) {
		t.Fatalf("ParseDataPreface = %q %x %v", gotID, gotToken, err)
	}
	if _, err := DataPreface("short", token); err == nil {
		t.Error("a short id made a preface")
	}
	if _, err := DataPreface(id, token[1:]); err == nil {
		t.Error("a short token made a preface")
	}
	for what, bad := range map[string][]byte{
		"short":       b[:len(b)-1],
		"long":        append(bytes.Clone(b), 'x'),
		"magic":       append([]byte("X"), b[1:]...),
		"upper id":    bytes.Replace(b, []byte("abcdef"), []byte("ABCDEF"), 1),
		"no space":    bytes.Replace(b, []byte("f a5"), []byte("f-a5"), 1),
		"no eol":      append(bytes.Clone(b[:len(b)-1]), ' '),
		"bad token":   append(bytes.Clone(b[:len(b)-3]), 'z', 'z', '\n'),
		"upper token": append(bytes.Clone(b[:len(b)-3]), 'A', 'A', '\n'),
	} {
		if _, _, err := ParseDataPreface(bad); err == nil {
			t.Errorf("%s: accepted %q", what, bad)
		}
	}
}

// FuzzDataPreface: prefaces come from whoever connects to the hub's agent port. The parser never panics, and what it
// accepts is exactly what DataPreface writes for the id and token it returns.
func FuzzDataPreface(f *testing.F) {
	good, _ := DataPreface(strings.Repeat("ab", TunnelIDLen/2), make([]byte, DataTokenLen))
	f.Add(good)
	f.Add([]byte(DataPrefaceMagic))
	f.Add([]byte{0x16, 0x03, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, token, err := ParseDataPreface(b)
		if err != nil {
			return
		}
		again, err := DataPreface(id, token)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %q, which is not the preface of %q %x (%q, %v)", b, id, token, again, err)
		}
	})
}
