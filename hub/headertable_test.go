package hub_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestAgentListenerHasNoHeaderTable: the gRPC-only listener tells every connection to keep no HPACK dynamic table
// (SETTINGS_HEADER_TABLE_SIZE 0), so the hub holds no indexed request headers per connected agent.
func TestAgentListenerHasNoHeaderTable(t *testing.T) {
	e := startLink(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := e.lis.DialContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, &tls.Config{RootCAs: e.dialer.CA, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	defer conn.Close()
	if err := conn.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		t.Fatalf("first frame from the hub: %v, want its SETTINGS", f)
	}
	size, ok := sf.Value(http2.SettingHeaderTableSize)
	if !ok || size != 0 {
		t.Fatalf("SETTINGS_HEADER_TABLE_SIZE = %d (sent: %v), want 0: %v", size, ok, sf)
	}
}
