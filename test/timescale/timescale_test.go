package timescale

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]float64{"": 1, "1": 1, "2.5": 2.5, "3": 3, "1000": 1000} {
		if got, err := parse(in); err != nil || got != want {
			t.Errorf("parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "0.5", "-2", "x", "NaN", "Inf", "1e9", " 2"} {
		if got, err := parse(in); err == nil || !strings.Contains(err.Error(), Env) {
			t.Errorf("parse(%q) = %v, %v; want an error naming %s", in, got, err, Env)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "1", "2.5", "NaN", "-1", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parse(s)
		if err == nil && !(v >= 1 && v <= 1000) {
			t.Fatalf("parse(%q) = %v without an error", s, v)
		}
	})
}
