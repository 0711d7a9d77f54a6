package scheduler

import "testing"

// TestRegionDistance checks the Levenshtein fallback of MinimalDistance against the values of Gardener's own tests.
func TestRegionDistance(t *testing.T) {
	for _, tc := range []struct {
		region      string
		base, orien string
	}{
		{"europe", "europe", ""},
		{"west_europe", ":_europe", "west"},
		{"europe-west", "europe-:", "west"},
		{"middle-west-europe", "middle-:-europe", "west"},
		{"ap-southeast-1", "ap-:east-1", "south"}, // the first orientation in Gardener's list wins
	} {
		if base, o := splitOrientation(tc.region); base != tc.base || o != tc.orien {
			t.Errorf("splitOrientation(%q) = %q, %q; want %q, %q", tc.region, base, o, tc.base, tc.orien)
		}
	}
	for _, tc := range []struct {
		seed, shoot string
		want        int
	}{
		{"europe", "asia", 12},
		{"europe-west", "asia-west", 12},
		{"europe-west", "asia-east", 14},
		{"europe-west", "asia-:", 13},
		{"europe-west", "europe-east", 2},
		{"europe-west", "europe-:", 1},
		{"europe-west", "europe-west", 0},
		{"eu-west-1", "eu-central-1", 2},
		{"us-east-1", "sa-east-1", 4},
	} {
		if got := regionDistance(tc.seed, tc.shoot); got != tc.want {
			t.Errorf("regionDistance(%q, %q) = %d, want %d", tc.seed, tc.shoot, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"kitten", "sitting", 3}, {"", "abc", 3}, {"flaw", "lawn", 2}, {"ü", "u", 1}} {
		if got := levenshtein([]rune(tc.a), []rune(tc.b)); got != tc.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestTaintsTolerated covers Gardener's TaintsAreTolerated, including its rule that more taints than tolerations
// are never tolerated.
func TestTaintsTolerated(t *testing.T) {
	v := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		taints [][2]*string
		tols   [][2]*string
		want   bool
	}{
		{"no taints", nil, nil, true},
		{"key only", [][2]*string{{v("a"), nil}}, [][2]*string{{v("a"), nil}}, true},
		{"key only, toleration with value", [][2]*string{{v("a"), nil}}, [][2]*string{{v("a"), v("x")}}, true},
		{"value must match", [][2]*string{{v("a"), v("x")}}, [][2]*string{{v("a"), v("y")}}, false},
		{"value tolerated", [][2]*string{{v("a"), v("x")}}, [][2]*string{{v("a"), v("x")}}, true},
		{"toleration without value does not tolerate a value", [][2]*string{{v("a"), v("x")}}, [][2]*string{{v("a"), nil}}, false},
		{"missing key", [][2]*string{{v("a"), nil}, {v("b"), nil}}, [][2]*string{{v("a"), nil}, {v("c"), nil}}, false},
		{"more taints than tolerations", [][2]*string{{v("a"), nil}, {v("a"), nil}}, [][2]*string{{v("a"), nil}}, false},
	} {
		seed := testSeed("s", "aws", "r")
		for _, x := range tc.taints {
			taint(*x[0], x[1])(seed)
		}
		shoot := testShoot()
		for _, x := range tc.tols {
			toleration(*x[0], x[1])(shoot)
		}
		if got := taintsTolerated(seed.Spec.Taints, shoot.Spec.Tolerations); got != tc.want {
			t.Errorf("%s: got %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestParseRegionDistances covers the decoder of region ConfigMap values.
func TestParseRegionDistances(t *testing.T) {
	got, err := ParseRegionDistances("eu-west-1: 10\n\"us-east-1\": 200\n")
	if err != nil || len(got) != 2 || got["eu-west-1"] != 10 || got["us-east-1"] != 200 {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := ParseRegionDistances(`{"a": 1}`); err != nil || got["a"] != 1 {
		t.Fatalf("JSON: got %v, %v", got, err)
	}
	if got, err := ParseRegionDistances("null"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("null: got %v, %v", got, err)
	}
	for _, bad := range []string{"a: 1.5", "a: [1]", "- a", "a: b", "a: 1\na: 2\n:"} {
		if _, err := ParseRegionDistances(bad); err == nil {
			t.Errorf("%q decoded without error", bad)
		}
	}
}
