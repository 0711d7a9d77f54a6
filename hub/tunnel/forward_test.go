package tunnel

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
)

// peersAt is a Peers whose replicas' hosts are hosts (a stand-in for the replicas' records in etcd).
type peersAt []string

func (p peersAt) TunnelPeer(context.Context, string) (string, error) { return "", nil }

func (p peersAt) ServeForwardedData(_ context.Context, c net.Conn) { _ = c.Close() }

func (p peersAt) IsPeer(_ context.Context, host string) bool {
	for _, h := range p {
		if h == host {
			return true
		}
	}
	return false
}

// sniff takes the forward preface only whole and only from a replica's host, and tells data prefaces apart; a
// connection without a forward preface is left as it was, its first byte unread.
func TestSniff(t *testing.T) {
	for name, c := range map[string]struct {
		peers Peers
		send  string
		kind  connKind
		err   string
		rest  string
	}{
		"a ClientHello":                  {peers: peersAt{"127.0.0.1"}, send: "\x16\x03\x01hello", rest: "\x16\x03\x01hello"},
		"anything else":                  {peers: peersAt{"127.0.0.1"}, send: "GET / HTTP/1.1\r\n", rest: "GET / HTTP/1.1\r\n"},
		"a data preface":                 {peers: peersAt{"127.0.0.1"}, send: "TRELLIS-TUNNEL-DATA/1 x", kind: forwardedData, rest: "TRELLIS-TUNNEL-DATA/1 x"},
		"a data preface, no replica":     {peers: peersAt{"10.0.0.1"}, send: "TRELLIS-TUNNEL-DATA/1 x", err: "no hub replica's host"},
		"forwarded by a replica":         {peers: peersAt{"127.0.0.1"}, send: forwardPreface + "\x16\x03\x01hello", kind: forwardedHello, rest: "\x16\x03\x01hello"},
		"a seed API forward":             {peers: peersAt{"127.0.0.1"}, send: seedAPIForwardPreface + "\x16", kind: forwardedSeedAPI, rest: "\x16"},
		"a seed API forward, no replica": {peers: peersAt{"10.0.0.1"}, send: seedAPIForwardPreface + "\x16", err: "no hub replica's host"},
		"forwarded by no replica":        {peers: peersAt{"10.0.0.1"}, send: forwardPreface + "\x16", err: "no hub replica's host"},
		"forwarded, no replicas known":   {send: forwardPreface + "\x16", err: "no hub replica's host"},
		"another preface":                {peers: peersAt{"127.0.0.1"}, send: "FORWARDED TRELLIS-TUNNEL/2\n\x16", err: "neither a TLS ClientHello"},
		"the preface's start, then EOF":  {peers: peersAt{"127.0.0.1"}, send: "FORW", err: "forward preface"},
	} {
		t.Run(name, func(t *testing.T) {
			tu, err := New(Config{Dialer: noDialer{}, Peers: c.peers})
			if err != nil {
				t.Fatal(err)
			}
			client, hubSide := tcpPair(t)
			defer client.Close()
			defer hubSide.Close()
			if _, err := io.WriteString(client, c.send); err != nil {
				t.Fatal(err)
			}
			_ = client.(interface{ CloseWrite() error }).CloseWrite()
			kind, rest, err := tu.sniff(context.Background(), hubSide)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil || kind != c.kind {
				t.Fatalf("kind %v, err %v; want %v", kind, err, c.kind)
			}
			if got, _ := io.ReadAll(rest); string(got) != c.rest {
				t.Fatalf("then read %q, want %q", got, c.rest)
			}
		})
	}
}

// FuzzSniff: whatever a connection begins with, sniff returns; a forward preface is taken only whole, and otherwise
// nothing is consumed.
func FuzzSniff(f *testing.F) {
	for _, seed := range []string{"\x16\x03\x01", forwardPreface + "\x16", seedAPIForwardPreface, "TRELLIS-TUNNEL-DATA/1 ", "FORWARDED", "", "F"} {
		f.Add([]byte(seed))
	}
	tu, err := New(Config{Dialer: noDialer{}, Peers: peersAt{"pipe"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, hubSide := net.Pipe()
		go func() { _, _ = client.Write(data); _ = client.Close() }()
		defer hubSide.Close()
		kind, rest, err := tu.sniff(context.Background(), hubSide)
		if err != nil {
			return
		}
		got, _ := io.ReadAll(rest)
		switch kind {
		case forwardedHello, forwardedSeedAPI:
			t.Fatalf("a forward preface honoured from a pipe, no replica's host: %q", data)
		case forwardedData:
			t.Fatalf("a data connection taken from a pipe, no replica's host: %q", data)
		case clientHello:
			if string(got) != string(data) {
				t.Fatalf("read %q after sniffing %q", got, data)
			}
		}
	})
}
