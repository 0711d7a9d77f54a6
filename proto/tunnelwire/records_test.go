package tunnelwire

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/credentials"
)

// writeCounter counts the writes to a connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(b)
}

// A write of WriteBufferSize through BatchRecords is one write of the connection under TLS (crypto/tls makes five
// records of it), and the peer reads the bytes as written.
func TestBatchRecords(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS() // for its certificate
	srv.Close()
	a, b := tcpPair(t)
	serverCfg := srv.TLS.Clone()
	serverCfg.NextProtos = []string{"h2"}
	server := tls.Server(b, serverCfg)
	go func() { _ = server.Handshake() }()

	raw := &writeCounter{Conn: a}
	creds := BatchRecords(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})) //nolint:gosec // a test's own server
	conn, _, err := creds.ClientHandshake(context.Background(), "example.com", raw)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), WriteBufferSize/16)
	for i := range 3 {
		raw.writes.Store(0)
		got := make([]byte, len(want))
		read := make(chan error, 1)
		go func() { _, err := io.ReadFull(server, got); read <- err }()
		if n, err := conn.Write(want); err != nil || n != len(want) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("write %d: the peer read other bytes", i)
		}
		// The first writes of a connection are small records (crypto/tls sizes them up); once past those, one write.
		if w := raw.writes.Load(); i > 1 && w != 1 {
			t.Errorf("write %d of %d bytes: %d writes of the connection, want 1", i, len(want), w)
		}
	}
}
