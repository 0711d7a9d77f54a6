package gateway_test

import (
	"net/url"
	"strings"
	"testing"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/trellis-dev/trellis/gateway"
)

func TestDeleteOptions(t *testing.T) {
	for _, tc := range []struct {
		query, body string
		pre         map[string]string
		err         string
		dryRun      bool
		orphan      bool
	}{
		{},
		{body: `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}`},
		{query: "propagationPolicy=Foreground"},
		{body: `{"preconditions":{"uid":"u1","resourceVersion":"7"}}`, pre: map[string]string{"preconditions.uid": "u1", "preconditions.resource_version": "7"}},
		{query: "propagationPolicy=Orphan", orphan: true},
		{query: "orphanDependents=true", orphan: true},
		{body: `{"orphanDependents":true}`, orphan: true},
		// The body wins over the query, as it does in Kubernetes.
		{query: "propagationPolicy=Background", body: `{"propagationPolicy":"Orphan"}`, orphan: true},
		{query: "propagationPolicy=Orphan", body: `{"propagationPolicy":"Background"}`},
		{body: `{"propagationPolicy":"Sideways"}`, err: `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"`},
		{body: `{"propagationPolicy":`, err: "invalid DeleteOptions"},
		{body: `{"kind":"Pod"}`, err: "decoded object cannot be converted to DeleteOptions"},
		{body: `{"gracePeriodSeconds":0}`},
		{body: `{"dryRun":["All"]}`, dryRun: true},
		// A dryRun in the query holds even with a body (kube-apiserver would read the body alone).
		{query: "dryRun=All", body: `{"propagationPolicy":"Background"}`, dryRun: true},
		{query: "dryRun=All", dryRun: true},
		{query: "dryRun=all", err: `DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["all"]: supported values: "All"`},
		{body: `{"dryRun":["Some"]}`, err: `dryRun: Unsupported value: ["Some"]`},
		{query: "gracePeriodSeconds=abc", err: "strconv.ParseInt"},
		{query: "orphanDependents=true&propagationPolicy=Background", err: "orphanDependents and deletionPropagation cannot be both set"},
		{body: `{"ignoreStoreReadErrorWithClusterBreakingPotential":true}`, err: "ignoreStoreReadErrorWithClusterBreakingPotential"},
	} {
		q, _ := url.ParseQuery(tc.query)
		opts, st := gateway.DeleteOptions(q, []byte(tc.body))
		msg := ""
		if st != nil {
			msg = st.ErrStatus.Message
		}
		if tc.err == "" && msg != "" || tc.err != "" && !strings.Contains(msg, tc.err) {
			t.Errorf("%q %q: got %q, want %q", tc.query, tc.body, msg, tc.err)
		}
		if st != nil {
			continue
		}
		orphan := opts.PropagationPolicy != nil && *opts.PropagationPolicy == kmetav1.DeletePropagationOrphan ||
			opts.OrphanDependents != nil && *opts.OrphanDependents //nolint:staticcheck // the deprecated field is still served
		if orphan != tc.orphan {
			t.Errorf("%q %q: orphan %v, want %v", tc.query, tc.body, orphan, tc.orphan)
		}
		if got := len(opts.DryRun) > 0; got != tc.dryRun {
			t.Errorf("%q %q: dry run %v, want %v", tc.query, tc.body, got, tc.dryRun)
		}
		pre := map[string]string{}
		if p := opts.Preconditions; p != nil {
			if p.UID != nil {
				pre["preconditions.uid"] = string(*p.UID)
			}
			if p.ResourceVersion != nil {
				pre["preconditions.resource_version"] = *p.ResourceVersion
			}
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

// FuzzDeleteOptions: any query and body are either refused with a reason or yield options, never both; whatever
// Kubernetes' own DeleteOptions type reads as orphaning is refused, and whatever asks for a dry run in the body or
// the query yields a dry run. Kubernetes reads the body with its case-sensitive JSON (util/json).
func FuzzDeleteOptions(f *testing.F) {
	for _, s := range []string{"", `{"propagationPolicy":"Orphan"}`, `{"preconditions":{"uid":"u"}}`, `{"orphanDependents":false}`, `[]`, `null`} {
		f.Add("", s)
	}
	f.Add("propagationPolicy=Orphan", "")
	f.Add("dryRun=All", `{"propagationPolicy":"Background"}`)
	f.Add("", `{"dryRun":["All"]}`)
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		opts, st := gateway.DeleteOptions(q, []byte(body))
		if (st == nil) == (opts == nil) {
			t.Fatalf("refused with %v and options %v", st, opts)
		}
		if st != nil {
			if st.ErrStatus.Message == "" || st.ErrStatus.Code != 400 && st.ErrStatus.Code != 422 {
				t.Fatalf("refusal without a reason or with code %d: %q", st.ErrStatus.Code, st.ErrStatus.Message)
			}
			return
		}
		var k kmetav1.DeleteOptions
		if utiljson.Unmarshal([]byte(body), &k) == nil && k.PropagationPolicy != nil &&
			(opts.PropagationPolicy == nil || *opts.PropagationPolicy != *k.PropagationPolicy) {
			t.Fatalf("the body's propagationPolicy was lost: %q %q", query, body)
		}
		if (len(k.DryRun) > 0 || len(q["dryRun"]) > 0) && len(opts.DryRun) == 0 {
			t.Fatalf("dry run lost: %q %q", query, body)
		}
	})
}
