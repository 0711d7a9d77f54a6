package tunnel

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// maxClientHello bounds how much of a connection is read looking for its ClientHello: a TLS record holds at most
// 16 KiB plus its header, and ClientHellos beyond one record are refused.
const maxClientHello = 16<<10 + 5

var errHelloRead = errors.New("clienthello read")

// ServerName returns the server name (SNI) of the TLS ClientHello that data begins with. It parses with crypto/tls
// itself: a server handshake on a connection that replays data and refuses to write reads the ClientHello and hands
// it to GetConfigForClient, which records the name and stops the handshake.
func ServerName(data []byte) (string, error) {
	name, _, err := readClientHello(&replayConn{r: bytes.NewReader(data)})
	return name, err
}

// readClientHello reads the ClientHello from c and returns its server name and the bytes read, which the caller
// passes on untouched.
func readClientHello(c net.Conn) (string, []byte, error) {
	rec := &recordingConn{Conn: c}
	var name string
	var got bool
	err := tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, got = h.ServerName, true
		return nil, errHelloRead
	}}).Handshake()
	if !got {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return "", rec.buf.Bytes(), fmt.Errorf("not a TLS ClientHello: %w", err)
	}
	if name == "" {
		return "", rec.buf.Bytes(), errors.New("the ClientHello names no server (SNI)")
	}
	return name, rec.buf.Bytes(), nil
}

// recordingConn records what is read and refuses to write (the handshake must not answer the client).
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Read(b []byte) (int, error) {
	if c.buf.Len() >= maxClientHello {
		return 0, errors.New("ClientHello too large")
	}
	b = b[:min(len(b), maxClientHello-c.buf.Len())]
	n, err := c.Conn.Read(b)
	c.buf.Write(b[:n])
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) { return 0, io.ErrClosedPipe }

// replayConn is a net.Conn that reads from r; for ServerName.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error)         { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error)        { return 0, io.ErrClosedPipe }
func (c *replayConn) Close() error                       { return nil }
func (c *replayConn) SetDeadline(t time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(t time.Time) error { return nil }
func (c *replayConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *replayConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
