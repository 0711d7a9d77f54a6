package gateway

import (
	"hash/crc32"
	"testing"
)

// crcCombine of two parts' CRCs is the CRC of the two joined, for any split (hash/crc32 is the reference).
func FuzzCRC32Combine(f *testing.F) {
	f.Add([]byte("hello, "), []byte("world"))
	f.Add([]byte{}, []byte("x"))
	f.Add([]byte(`{"a":1}`), []byte{})
	f.Add(make([]byte, 70000), []byte(`,{"kind":"Shoot"}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), b...))
		if got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), crcShift(uint64(len(b)))); got != want {
			t.Fatalf("crcCombine of %d and %d bytes: %08x, want %08x", len(a), len(b), got, want)
		}
	})
}

// Lengths whose bits reach beyond what a fuzzer makes: x^(8n) for large n against appending n zero bytes.
func TestCRC32CombineLongParts(t *testing.T) {
	for _, n := range []int{1, 2, 3, 255, 256, 65535, 65536, 1 << 20, 3<<20 + 7} {
		zeros := make([]byte, n)
		a := []byte("the part before")
		want := crc32.ChecksumIEEE(append(append([]byte{}, a...), zeros...))
		if got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(zeros), crcShift(uint64(n))); got != want {
			t.Errorf("%d bytes after: %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkCRC32Combine(b *testing.B) {
	for i := range b.N {
		_ = crcCombine(uint32(i), 0x12345678, crcShift(uint64(19000+i%1000)))
	}
}
