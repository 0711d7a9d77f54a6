package gateway

// The CRC-32 of a gzip member joined from segments is the CRC of all its bytes. Each Segment keeps the CRC of its own
// bytes, so a list's is combined from them (crcCombine) rather than computed over the whole answer again: a list of
// 2,000 shoots is 38 MB of JSON, and hashing it was a sixth of the CPU a gzipped list cost.
//
// The arithmetic is that of CRC-32 (IEEE, reflected) as polynomials over GF(2) modulo its generator: appending n zero
// bytes to a message multiplies its CRC register by x^(8n), so crc(A‖B) = crc(A)·x^(8|B|) + crc(B) (zlib's
// crc32_combine, after Mark Adler's derivation).

// crcPoly is the reflected CRC-32 (IEEE) polynomial, as hash/crc32.IEEE.
const crcPoly = 0xedb88320

// crcMul is a(x)·b(x) modulo the polynomial, both reflected (x^0 is the top bit).
func crcMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcPow2 holds x^(2^k) modulo the polynomial for k < 64.
var crcPow2 = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = crcMul(p, p)
	}
	return t
}()

// crcShift is x^(8n) modulo the polynomial: what n bytes appended multiply a CRC register by.
func crcShift(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = crcMul(crcPow2[k], p)
		}
	}
	return p
}

// crcCombine is the CRC-32 (IEEE) of A followed by B, given crcA of A, crcB of B, and shiftB, crcShift of B's length
// (which a Segment makes once).
func crcCombine(crcA, crcB, shiftB uint32) uint32 { return crcMul(shiftB, crcA) ^ crcB }
