package gateway_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/gateway"
)

func TestDeleteOptions(t *testing.T) {
	for _, tc := range []struct {
		query, body string
		pre         map[string]string
		err         string
	}{
		{},
		{body: `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}`},
		{query: "propagationPolicy=Foreground"},
		{body: `{"preconditions":{"uid":"u1","resourceVersion":"7"}}`, pre: map[string]string{"preconditions.uid": "u1", "preconditions.resource_version": "7"}},
		{query: "propagationPolicy=Orphan", err: "Orphan is not supported"},
		{query: "orphanDependents=true", err: "Orphan is not supported"},
		{body: `{"orphanDependents":true}`, err: "Orphan is not supported"},
		// The body wins over the query, as it does in Kubernetes.
		{query: "propagationPolicy=Background", body: `{"propagationPolicy":"Orphan"}`, err: "Orphan is not supported"},
		{body: `{"propagationPolicy":"Sideways"}`, err: `propagationPolicy: Unsupported value: "Sideways"`},
		{body: `{"propagationPolicy":`, err: "invalid DeleteOptions"},
		{body: `{"gracePeriodSeconds":0}`},
	} {
		q, _ := url.ParseQuery(tc.query)
		pre, msg := gateway.DeleteOptions(q, []byte(tc.body))
		if tc.err == "" && msg != "" || tc.err != "" && !strings.Contains(msg, tc.err) {
			t.Errorf("%q %q: got %q, want %q", tc.query, tc.body, msg, tc.err)
		}
		if tc.err == "" && len(pre) != len(tc.pre) {
			t.Errorf("%q %q: preconditions %v, want %v", tc.query, tc.body, pre, tc.pre)
		}
		for k, v := range tc.pre {
			if pre[k] != v {
				t.Errorf("%q %q: %s = %q, want %q", tc.query, tc.body, k, pre[k], v)
			}
		}
	}
}

// FuzzDeleteOptions: any query and body are either refused with a reason or yield preconditions, never both; and
// whatever Kubernetes' own DeleteOptions type reads as orphaning is refused.
func FuzzDeleteOptions(f *testing.F) {
	for _, s := range []string{"", `{"propagationPolicy":"Orphan"}`, `{"preconditions":{"uid":"u"}}`, `{"orphanDependents":false}`, `[]`, `null`} {
		f.Add("", s)
	}
	f.Add("propagationPolicy=Orphan", "")
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		pre, msg := gateway.DeleteOptions(q, []byte(body))
		if msg != "" && pre != nil {
			t.Fatalf("refused with %q and preconditions %v", msg, pre)
		}
		var k kmetav1.DeleteOptions
		if json.Unmarshal([]byte(body), &k) == nil && msg == "" &&
			(k.PropagationPolicy != nil && *k.PropagationPolicy == kmetav1.DeletePropagationOrphan || k.OrphanDependents != nil && *k.OrphanDependents) { //nolint:staticcheck // the deprecated field is what must be refused
			t.Fatalf("orphaning accepted: %q %q", query, body)
		}
	})
}
