package tunnelwire

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t testing.TB) (a, b net.Conn) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if a, err = net.Dial("tcp", lis.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if b, err = lis.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// Copy carries everything a socket sends, also more than a frame in one write, and ends without error at its end.
func TestCopyToEnd(t *testing.T) {
	a, b := tcpPair(t)
	want := bytes.Repeat([]byte("0123456789"), FrameSize/3)
	go func() { _, _ = a.Write(want); a.Close() }()
	var got bytes.Buffer
	n, err := Copy(&got, b)
	if err != nil || n != int64(len(want)) || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("Copy = %d, %v; got %d bytes equal %v", n, err, got.Len(), bytes.Equal(got.Bytes(), want))
	}
}

// A Copy waiting on an idle socket ends with the read deadline's error and when the socket is closed: the wait
// without a buffer still honours both.
func TestCopyWaitEnds(t *testing.T) {
	_, b := tcpPair(t)
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := Copy(&bytes.Buffer{}, b); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Copy after the deadline: %v, want a timeout", err)
	}
	_ = b.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := Copy(&bytes.Buffer{}, b); done <- err }()
	time.Sleep(20 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Copy after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Copy still waits after Close")
	}
}
