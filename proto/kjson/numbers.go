package kjson

import (
	"errors"
	"math"
	"strconv"
)

var (
	errNotInteger = errors.New("not an integer")
	errRange      = errors.New("out of range")
	errNaN        = errors.New("NaN and infinities are not valid JSON numbers")
)

// parseMagnitude reads a JSON number literal (already validated by the tokenizer) that must denote an integer,
// returning its sign and magnitude. Fractions and exponents are accepted when the value is integral (1.0, 1e3);
// errNotInteger and errRange report the rest. It allocates nothing.
func parseMagnitude(lit []byte) (neg bool, mag uint64, err error) {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		neg = true
		i++
	}
	// Fast path: plain digits.
	j := i
	for ; j < len(lit); j++ {
		c := lit[j]
		if c < '0' || c > '9' {
			break
		}
		d := uint64(c - '0')
		if mag > (math.MaxUint64-d)/10 {
			// Too many digits for 64 bits unless a fraction or exponent scales it down; use the slow path.
			return parseMagnitudeSlow(lit, neg, i)
		}
		mag = mag*10 + d
	}
	if j == len(lit) {
		if j == i {
			return false, 0, errNotInteger
		}
		return neg, mag, nil
	}
	return parseMagnitudeSlow(lit, neg, i)
}

// parseMagnitudeSlow handles literals with a fraction, an exponent or many digits: the value is digits × 10^exp
// once trailing zeros are folded into exp.
func parseMagnitudeSlow(lit []byte, neg bool, i int) (bool, uint64, error) {
	intStart := i
	for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
		i++
	}
	intDigits := lit[intStart:i]
	var fracDigits []byte
	if i < len(lit) && lit[i] == '.' {
		i++
		fs := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
		fracDigits = lit[fs:i]
	}
	var exp int64
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		expNeg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		es := i
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			if exp < 1<<40 { // clamp: beyond this the answer no longer changes
				exp = exp*10 + int64(lit[i]-'0')
			}
			i++
		}
		if i == es {
			return false, 0, errNotInteger
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(lit) || len(intDigits) == 0 {
		return false, 0, errNotInteger
	}
	exp -= int64(len(fracDigits))

	// The significant digits are intDigits followed by fracDigits, without leading and trailing zeros.
	digit := func(k int) byte {
		if k < len(intDigits) {
			return intDigits[k]
		}
		return fracDigits[k-len(intDigits)]
	}
	n := len(intDigits) + len(fracDigits)
	lo, hi := 0, n
	for lo < hi && digit(lo) == '0' {
		lo++
	}
	if lo == hi {
		return neg, 0, nil // zero, however written
	}
	for digit(hi-1) == '0' {
		hi--
		exp++
	}
	if exp < 0 {
		return false, 0, errNotInteger
	}
	if int64(hi-lo)+exp > 20 {
		return false, 0, errRange
	}
	var mag uint64
	for k := lo; k < hi; k++ {
		d := uint64(digit(k) - '0')
		if mag > (math.MaxUint64-d)/10 {
			return false, 0, errRange
		}
		mag = mag*10 + d
	}
	for ; exp > 0; exp-- {
		if mag > math.MaxUint64/10 {
			return false, 0, errRange
		}
		mag *= 10
	}
	return neg, mag, nil
}

// parseInt reads an integer literal into a signed integer of the given bit size.
func parseInt(lit []byte, bits uint) (int64, error) {
	neg, mag, err := parseMagnitude(lit)
	if err != nil {
		return 0, err
	}
	limit := uint64(1) << (bits - 1)
	if neg {
		if mag > limit {
			return 0, errRange
		}
		return -int64(mag), nil // -int64(1<<63) wraps to MinInt64, as intended
	}
	if mag >= limit {
		return 0, errRange
	}
	return int64(mag), nil
}

// parseUint reads an integer literal into an unsigned integer of the given bit size.
func parseUint(lit []byte, bits uint) (uint64, error) {
	neg, mag, err := parseMagnitude(lit)
	if err != nil {
		return 0, err
	}
	if neg && mag != 0 {
		return 0, errRange
	}
	if bits < 64 && mag >= uint64(1)<<bits {
		return 0, errRange
	}
	return mag, nil
}

// isIntegerText reports whether s is a plain JSON integer (-?(0|[1-9][0-9]*)), the only form accepted for quoted
// 64-bit integers.
func isIntegerText(s []byte) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseFloat reads a JSON number literal into a float of the given bit size; overflow is an error.
func parseFloat(lit []byte, bits int) (float64, error) {
	f, err := strconv.ParseFloat(string(lit), bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) { // overflow; underflow rounds to zero without an error
			return 0, errRange
		}
		return 0, errNotNumber
	}
	return f, nil
}

var errNotNumber = errors.New("not a number")

// appendFloat appends f as encoding/json writes float32 and float64 values: shortest representation, exponent form
// below 1e-6 and from 1e21, "e-7" rather than "e-07".
func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, errNaN
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
