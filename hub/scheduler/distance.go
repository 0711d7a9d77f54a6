package scheduler

import "strings"

// orientations are the words of a region name that say where in its area the region lies.
var orientations = []string{"north", "south", "east", "west", "central"}

// splitOrientation cuts the first orientation word out of a region name: "eu-west-1" is ("eu-:-1", "west"). A name
// without one is returned whole with no orientation.
func splitOrientation(region string) (base, orientation string) {
	for _, o := range orientations {
		if before, after, ok := strings.Cut(region, o); ok {
			return before + ":" + after, o
		}
	}
	return region, ""
}

// regionDistance is Gardener's fallback distance of MinimalDistance between a seed's and a shoot's region: twice the
// Levenshtein distance of their base names, plus 0 when both have the same orientation, 1 when only one has one and
// 2 when they differ. Regions of one area (eu-west-1, eu-central-1) are thus nearer than unrelated ones.
func regionDistance(seed, shoot string) int {
	seedBase, seedOrientation := splitOrientation(seed)
	shootBase, shootOrientation := splitOrientation(shoot)
	d := 2 * levenshtein([]rune(seedBase), []rune(shootBase))
	switch {
	case seedOrientation == "" && shootOrientation == "":
	case seedOrientation == "" || shootOrientation == "":
		d++
	case seedOrientation != shootOrientation:
		d += 2
	}
	return d
}

// levenshtein is the edit distance of a and b with insertion, deletion and substitution each costing 1.
func levenshtein(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
