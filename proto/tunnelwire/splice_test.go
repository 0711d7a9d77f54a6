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
	r := startSplice(t)
	in, out := r.in, r.out
	if _, ok := r.srcEnd.(*net.TCPConn); !ok {
		t.Fatalf("a %T", r.srcEnd)
	}
	moved := &r.moved

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
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Splice at the source's end: %v", r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Splice did not end with its source")
	}
	if want := int64(len(data) + 7); r.n != want || moved.Load() != want {
		t.Fatalf("Splice returned %d, reported %d, want %d", r.n, moved.Load(), want)
	}
}

// spliceRun is a Splice between two TCP pairs: the test writes in (Splice reads srcEnd) and reads out (Splice
// writes dstEnd); done is closed when Splice returned n and err.
type spliceRun struct {
	in, srcEnd, dstEnd, out net.Conn
	moved                   atomic.Int64 // what progress reported
	done                    chan struct{}
	n                       int64
	err                     error
}

func startSplice(t testing.TB) *spliceRun {
	r := &spliceRun{done: make(chan struct{})}
	r.in, r.srcEnd = tcpPair(t)
	r.dstEnd, r.out = tcpPair(t)
	go func() {
		defer close(r.done)
		r.n, r.err = Splice(r.dstEnd, r.srcEnd, func(m int) { r.moved.Add(int64(m)) })
	}()
	t.Cleanup(func() { r.srcEnd.Close(); r.dstEnd.Close(); <-r.done })
	return r
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
