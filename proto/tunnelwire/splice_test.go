package tunnelwire

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Splice between TCP connections moves every byte, reports each piece as it moves (a trickle is counted before the
// stream ends: counters and idle timers stay current), and ends with nil at the source's end.
func TestSplice(t *testing.T) {
	in, srcEnd := tcpPair(t)  // the test writes in; Splice reads srcEnd
	dstEnd, out := tcpPair(t) // Splice writes dstEnd; the test reads out
	if _, ok := srcEnd.(*net.TCPConn); !ok {
		t.Fatalf("a %T", srcEnd)
	}
	var moved atomic.Int64
	done := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = Splice(dstEnd, srcEnd, func(m int) { moved.Add(int64(m)) })
		done <- err
	}()

	if _, err := in.Write([]byte("trickle")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 7)
	if _, err := io.ReadFull(out, b); err != nil || string(b) != "trickle" {
		t.Fatalf("read %q, %v", b, err)
	}
	for deadline := time.Now().Add(20 * time.Second); moved.Load() != 7; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("7 bytes moved, progress reported %d", moved.Load())
		}
	}

	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	go func() { _, _ = in.Write(data); _ = in.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(io.LimitReader(out, int64(len(data))))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Splice at the source's end: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Splice did not end with its source")
	}
	if want := int64(len(data) + 7); n != want || moved.Load() != want {
		t.Fatalf("Splice returned %d, reported %d, want %d", n, moved.Load(), want)
	}
}

// PeekByte leaves the byte in the socket: a read after it sees it again.
func TestPeekByte(t *testing.T) {
	a, b := tcpPair(t)
	if _, err := a.Write([]byte{0x16, 3}); err != nil {
		t.Fatal(err)
	}
	first, c, err := PeekByte(b)
	if err != nil || first != 0x16 {
		t.Fatalf("PeekByte = %x, %v", first, err)
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte{0x16, 3}) {
		t.Fatalf("after the peek: %x, %v", got, err)
	}
}
