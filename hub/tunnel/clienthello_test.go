package tunnel

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// recordHello returns the bytes a crypto/tls client sends first when it dials serverName.
func recordHello(t testing.TB, serverName string) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := tls.Client(client, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}) //nolint:gosec // only the hello is recorded
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.HandshakeContext(ctx)
	}()
	buf := make([]byte, maxClientHello)
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	for {
		n, err := server.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil || len(got) >= 5 && len(got) >= 5+int(got[3])<<8|int(got[4]) {
			break
		}
	}
	client.Close()
	<-done
	return got
}

func TestServerName(t *testing.T) {
	hello := recordHello(t, "api.dev.garden.tunnel.example")
	name, err := ServerName(hello)
	if err != nil || name != "api.dev.garden.tunnel.example" {
		t.Fatalf("ServerName = %q, %v", name, err)
	}
	for what, data := range map[string][]byte{
		"empty":          nil,
		"http":           []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"truncated":      hello[:len(hello)/2],
		"no server name": recordHello(t, ""),
	} {
		if name, err := ServerName(data); err == nil {
			t.Errorf("%s: ServerName = %q, want an error", what, name)
		}
	}
	if _, err := ServerName(recordHello(t, "")); err == nil || !strings.Contains(err.Error(), "SNI") {
		t.Errorf("no server name: error %v should say SNI", err)
	}
	// The bytes read are the hello, whole: what the target must see.
	_, read, err := readClientHello(&replayConn{r: bytes.NewReader(append(hello, "rest"...))})
	if err != nil || !bytes.HasPrefix(append(hello, "rest"...), read) || len(read) < len(hello) {
		t.Fatalf("read %d bytes (%v), want the %d of the hello", len(read), err, len(hello))
	}
}

func FuzzServerName(f *testing.F) {
	f.Add(recordHello(f, "api.dev.garden.tunnel.example"))
	f.Add(recordHello(f, ""))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		name, err := ServerName(data)
		if err == nil && name == "" {
			t.Fatal("no error and no name")
		}
	})
}
