package main

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/trellis-dev/trellis/test/bench/procstat"
)

// target is a server the workload runs against: a hub (with its loops off or on), or the peer, kube-apiserver with
// its etcd serving a Shoot CRD.
type target struct {
	name  string
	url   string
	tls   *tls.Config // trusts the server; with the peer it also carries the admin's client certificate
	token string      // bearer token; empty with a client certificate
	// pids are the processes whose CPU time and memory the phases report: the hub, or the peer's etcd and
	// kube-apiserver.
	pids []int
	// hub is the hub process; nil for the peer. loops says whether its scheduler and controllers run.
	hub   *hubProc
	loops bool
	// prerequisites are the objects created before the shoots.
	prerequisites func() []prerequisite
	stop          func()
}

// hubTarget is the target of a started hub.
func hubTarget(name string, h *hubProc, loops bool, prereqs func() []prerequisite) *target {
	return &target{loops: loops,
		name: name, url: h.URL, tls: &tls.Config{RootCAs: h.Pool, MinVersion: tls.VersionTLS12}, token: h.Token,
		pids: []int{h.PID()}, hub: h, prerequisites: prereqs, stop: h.stop,
	}
}

func (t *target) newClient(id int, seed uint64, timeout time.Duration) *client {
	c := &client{url: t.url, token: t.token, rnd: rand.New(rand.NewPCG(seed, uint64(id)))}
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	tr := &http.Transport{
		TLSClientConfig:     t.tls.Clone(),
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     5 * time.Minute,
		// The connection counts what it reads: the bytes of answers as sent (TLS records, compressed or not).
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, read: &c.wire}, nil
		},
	}
	c.http = &http.Client{Transport: tr, Timeout: timeout}
	return c
}

// countingConn adds what it reads to read.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// cpu is the user+system CPU time of the target's processes so far.
func (t *target) cpu() time.Duration {
	var d time.Duration
	for _, pid := range t.pids {
		d += procstat.CPU(strconv.Itoa(pid))
	}
	return d
}

// rss is the sum of VmRSS and of VmHWM (peaks) of the target's processes.
func (t *target) rss() (cur, peak int64) {
	for _, pid := range t.pids {
		c, p := procstat.RSS(strconv.Itoa(pid))
		cur, peak = cur+max(c, 0), peak+max(p, 0)
	}
	return cur, peak
}

// logProblems are the hub's warning and error log lines; the peer reports none.
func (t *target) logProblems(keep int) logProblems {
	if t.hub == nil {
		return logProblems{}
	}
	return t.hub.logProblems(keep)
}
