package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/trellis-dev/trellis/test/landscape"
)

// apiRequests counts what seeds' kube-apiservers served (apiserver_request_total): all requests and the writes
// among them. The seed's clients are the agent, provider-local and kube-controller-manager; a rate near a client's
// QPS limit with idle CPUs means that client is throttling itself.
type apiRequests struct {
	total, writes float64
}

func (a apiRequests) sub(b apiRequests) apiRequests {
	return apiRequests{a.total - b.total, a.writes - b.writes}
}

// writeVerbs are the verbs of apiserver_request_total that change objects.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// seedRequests sums apiserver_request_total over the seeds' kube-apiservers; a seed whose metrics cannot be read
// counts nothing, and ok is false.
func seedRequests(ctx context.Context, l *landscape.Landscape, seeds []string) (sum apiRequests, ok bool) {
	ok = true
	for _, name := range seeds {
		s := l.Seed(name)
		if s == nil || s.Client == nil {
			ok = false
			continue
		}
		body, err := s.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			ok = false
			continue
		}
		r := parseRequestTotal(string(body))
		sum.total += r.total
		sum.writes += r.writes
	}
	return sum, ok
}

// parseRequestTotal sums the apiserver_request_total series of a Prometheus text exposition.
func parseRequestTotal(metrics string) apiRequests {
	var r apiRequests
	for _, line := range strings.Split(metrics, "\n") {
		labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(labels, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(labels[i+1:], 64)
		if err != nil {
			continue
		}
		r.total += v
		if _, verb, ok := strings.Cut(labels[:i], `verb="`); ok {
			verb, _, _ = strings.Cut(verb, `"`)
			if writeVerbs[verb] {
				r.writes += v
			}
		}
	}
	return r
}
