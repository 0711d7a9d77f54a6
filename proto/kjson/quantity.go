package kjson

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantities: the fields marked [(trellis.meta.v1.quantity) = true] hold Kubernetes resource.Quantity values as
// strings. Kubernetes reads a quantity from a JSON string or number and rejects text that resource.ParseQuantity
// rejects; kjson does the same, but keeps the text as written instead of canonicalizing it.

// zeroQuantity is how Kubernetes writes the zero resource.Quantity, which JSON null decodes to inside a map or list.
const zeroQuantity = "0"

// Bounds on the text given to resource.ParseQuantity (see quantityProbe).
const (
	maxQuantityDigits   = 18 // digits kept of each run in the number part
	maxQuantityExponent = 3  // characters kept of a decimal exponent (sign and digits), e.g. "e-12"
)

// checkQuantity reports whether s is a valid quantity, with resource.ParseQuantity's error if not.
func checkQuantity(s string) error {
	_, err := resource.ParseQuantity(quantityProbe(s, maxQuantityDigits, maxQuantityExponent))
	return err
}

// quantityProbe returns s, or a shorter text that resource.ParseQuantity accepts or rejects (with the same error)
// exactly when it accepts or rejects s. ParseQuantity normalizes a value to nano precision with big-number
// arithmetic whose cost grows with the value's digits and decimal exponent: "1e-2147483648" does not finish, a
// quantity of a megabyte of digits takes seconds. Whether it succeeds does not depend on either, though:
//
//   - its errors come from the syntax (sign, digits, '.', digits, suffix letters, sign, digits: ErrFormatWrong),
//     from a suffix it cannot interpret, where a decimal exponent counts when it parses as an int64 (ErrSuffix),
//     and from a number part without digits ("", "+", "-", ".", ...) when it leaves its fast path (ErrNumeric);
//   - its fast path, which a number part without digits takes unless the exponent (as an int32) is below -9,
//     cannot fail, and neither can the arithmetic after the exact parse.
//
// So each run of digits in the number part is cut to maxDigits (at least one digit is kept where there was one),
// and a decimal exponent longer than maxExponent characters that parses as an int64 is replaced by 0, or by -10
// where it is below -9 as an int32. The rest (suffix letters and anything that makes the text invalid) is kept, so
// errors stay the same; realistic quantities are passed as they are.
func quantityProbe(s string, maxDigits, maxExponent int) string {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	intStart, intEnd := i, digitsEnd(s, i)
	fracStart, fracEnd := intEnd, intEnd
	if intEnd < len(s) && s[intEnd] == '.' {
		fracStart = intEnd + 1
		fracEnd = digitsEnd(s, fracStart)
	}
	rest := s[fracEnd:]
	bigExponent := false
	var exponent int64
	if len(rest) > 1+maxExponent && (rest[0] == 'e' || rest[0] == 'E') {
		exponent, bigExponent = parseExponent(rest[1:])
	}
	if intEnd-intStart <= maxDigits && fracEnd-fracStart <= maxDigits && !bigExponent {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:intStart])
	b.WriteString(s[intStart:min(intEnd, intStart+maxDigits)])
	if fracStart > intEnd {
		b.WriteByte('.')
		b.WriteString(s[fracStart:min(fracEnd, fracStart+maxDigits)])
	}
	if bigExponent {
		b.WriteByte(rest[0])
		if int32(exponent) < -9 { // ParseQuantity truncates the exponent to an int32
			b.WriteString("-10")
		} else {
			b.WriteByte('0')
		}
	} else {
		b.WriteString(rest)
	}
	return b.String()
}

// digitsEnd returns the index of the first non-digit of s at or after i.
func digitsEnd(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parseExponent parses s as resource.ParseQuantity parses a decimal exponent after 'e' or 'E': an optionally
// signed run of digits that fits an int64.
func parseExponent(s string) (int64, bool) {
	d := s
	if d != "" && (d[0] == '+' || d[0] == '-') {
		d = d[1:]
	}
	if d == "" || digitsEnd(d, 0) != len(d) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
