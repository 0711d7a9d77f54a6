package scheduler

import (
	"log/slog"
	"testing"
)

// FuzzParseRegionDistances feeds the decoder of region ConfigMap values (user input) arbitrary text: it must not
// panic, and what it accepts must be a mapping the MinimalDistance strategy can use.
func FuzzParseRegionDistances(f *testing.F) {
	for _, s := range []string{"eu-west-1: 10\nus-east-1: 200\n", `{"a": 1}`, "null", "a: 1.5", "- x", "a:\n  b: 1", "a: 99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		m, err := ParseRegionDistances(data)
		if err != nil {
			return
		}
		if m == nil {
			t.Fatalf("%q: nil map without error", data)
		}
		shoot := testShoot(region("r"))
		cm := regionConfig(map[string]string{"r": data})
		if _, err := regionConfigMinimalDistance(nil, shoot, cm, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatalf("%q decoded but the strategy rejects it: %v", data, err)
		}
	})
}
