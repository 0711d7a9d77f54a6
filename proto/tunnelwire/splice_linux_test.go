package tunnelwire

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// relay splices between two connections as the hub's passthrough does: each direction with Splice, the end of b's
// side half-closes a's, the end of a's side closes both. It returns each direction's Splice result.
func relay(a, b net.Conn, progress func(int)) (fromB, fromA <-chan error) {
	fb, fa := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := Splice(a, b, progress)
		if err == nil {
			_ = a.(*net.TCPConn).CloseWrite()
		}
		fb <- err
	}()
	go func() {
		_, err := Splice(b, a, progress)
		_ = a.Close()
		_ = b.Close()
		fa <- err
	}()
	return fb, fa
}

// A half-close passes through: the far side's end reaches the near side as its end, after every byte, and the near
// side still sends afterwards; the near side's end then ends the other direction.
func TestSpliceHalfClose(t *testing.T) {
	near, relayNear := tcpPair(t)
	relayFar, far := tcpPair(t)
	fromFar, fromNear := relay(relayNear, relayFar, nil)

	if _, err := far.Write([]byte("response")); err != nil {
		t.Fatal(err)
	}
	_ = far.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(near)
	if err != nil || string(got) != "response" {
		t.Fatalf("near read %q, %v; want the response, then the end", got, err)
	}
	if err := <-fromFar; err != nil {
		t.Fatalf("Splice at the far side's end: %v", err)
	}

	if _, err := near.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(far, b); err != nil || string(b) != "more" {
		t.Fatalf("far read %q, %v after its half-close", b, err)
	}
	_ = near.Close()
	if err := <-fromNear; err != nil {
		t.Fatalf("Splice at the near side's end: %v", err)
	}
	if n, err := far.Read(b); n != 0 || err != io.EOF {
		t.Fatalf("far after the near side's end: %d, %v; want EOF", n, err)
	}
}

// Writes of one byte and of megabytes, interleaved, arrive whole and in order, and progress counts every byte.
func TestSpliceMixedWrites(t *testing.T) {
	r := startSplice(t)
	in, out := r.in, r.out
	sizes := []int{1, 3 << 20, 7, 64 << 10, 2, 300_001, 1, 1, 1 << 20, 5}
	var sent bytes.Buffer
	for _, size := range sizes {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		sent.Write(b)
	}
	go func() {
		data := sent.Bytes()
		for _, size := range sizes {
			if _, err := in.Write(data[:size]); err != nil {
				return
			}
			data = data[size:]
		}
		_ = in.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(io.LimitReader(out, int64(sent.Len())))
	if err != nil || !bytes.Equal(got, sent.Bytes()) {
		t.Fatalf("read %d bytes (%v), equal %v; want the %d written", len(got), err, bytes.Equal(got, sent.Bytes()), sent.Len())
	}
	if <-r.done; r.err != nil {
		t.Fatalf("Splice at the source's end: %v", r.err)
	}
	if want := int64(sent.Len()); r.n != want || r.moved.Load() != want {
		t.Fatalf("Splice returned %d, reported %d, want %d", r.n, r.moved.Load(), want)
	}
}

// A reader that stops reading holds the copy up (nothing is lost, the copy does not fail or end); once it reads
// again, everything arrives.
func TestSpliceStalledReader(t *testing.T) {
	r := startSplice(t)
	in, out, moved := r.in, r.out, &r.moved
	data := make([]byte, 64<<20) // more than the sockets and the pipe hold
	_, _ = rand.Read(data)
	go func() { _, _ = in.Write(data); _ = in.(*net.TCPConn).CloseWrite() }()

	// Wait until the copy stands still (the reader's and the destination's buffers are full).
	for last, still := int64(-1), 0; still < 5; time.Sleep(50 * time.Millisecond) {
		if m := moved.Load(); m == last {
			still++
		} else {
			last, still = m, 0
		}
	}
	select {
	case <-r.done:
		t.Fatalf("Splice ended while its reader stalled: %v", r.err)
	default:
	}
	if m := moved.Load(); m >= int64(len(data)) {
		t.Fatalf("%d bytes moved to a reader that read nothing; the test needs more than the buffers hold", m)
	}
	// What the destination queues unsent for the stalled reader is bounded (TCP_NOTSENT_LOWAT; one segment more
	// may be taken before the bound is checked), not the send buffer's autotuned megabytes.
	if unsent := notSent(t, r.dstEnd); unsent > notSentLowat+64<<10 {
		t.Errorf("the destination holds %d bytes unsent for a stalled reader, want at most %d", unsent, notSentLowat+64<<10)
	}
	got, err := io.ReadAll(io.LimitReader(out, int64(len(data))))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (%v) after the stall, want the %d written", len(got), err, len(data))
	}
	if <-r.done; r.err != nil {
		t.Fatalf("Splice at the source's end: %v", r.err)
	}
}

// notSent is how many bytes c holds that it has not sent yet (SIOCOUTQNSD).
func notSent(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQNSD) }); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatal(ierr)
	}
	return n
}

// Closing a connection under a waiting copy ends it with an error, not as the source's end (which the hub would
// pass on as a half-close): the source while it waits for bytes, the destination while it waits for room.
func TestSpliceClosed(t *testing.T) {
	t.Run("source", func(t *testing.T) {
		r := startSplice(t)
		_ = r.srcEnd.Close()
		if <-r.done; r.err == nil {
			t.Fatal("Splice ended without an error when its source was closed")
		}
	})
	t.Run("destination", func(t *testing.T) {
		r := startSplice(t) // out is never read
		go func() { _, _ = r.in.Write(make([]byte, 64<<20)) }()
		for r.moved.Load() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		_ = r.dstEnd.Close()
		if <-r.done; !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("Splice = %v when its destination was closed, want net.ErrClosed", r.err)
		}
	})
}

// Idle copies hold no pipe: they give it back before they wait.
func TestSpliceIdleHoldsNoPipe(t *testing.T) {
	const idle = 64
	before := openPipes(t)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for range idle {
		in, srcEnd := tcpPair(t)
		dstEnd, out := tcpPair(t)
		wg.Go(func() { _, _ = Splice(dstEnd, srcEnd, nil) })
		// One byte through each: every copy has had a pipe and waits again.
		if _, err := in.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(out, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Pipes in the pool (or dropped by it: the race detector's pool drops some) are closed once garbage; pipes the
	// copies held would stay.
	held := openPipes(t) - before
	for deadline := time.Now().Add(20 * time.Second); held >= idle/4 && time.Now().Before(deadline); held = openPipes(t) - before {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if held >= idle/4 {
		t.Fatalf("%d idle copies hold %d pipes", idle, held)
	}
}

// openPipes counts the process's open pipes (their read ends: a pool's pipe has both ends open).
func openPipes(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(link, "pipe:") {
			n++
		}
	}
	return n / 2
}

// BenchmarkSpliceChain streams through two copies in a row (the hub's and the agent's: three loopback TCP
// connections), with Splice and with Copy (through user space), against one connection, in 16 KiB writes (a TLS
// record each), and reports the process's CPU time per MiB. docs/benchmarks.md has results.
func BenchmarkSpliceChain(b *testing.B) {
	for _, bc := range []struct {
		name string
		hop  func(dst, src net.Conn)
		hops int
	}{
		{"direct", nil, 0},
		{"splice", func(dst, src net.Conn) { _, _ = Splice(dst, src, nil) }, 2},
		{"copy", func(dst, src net.Conn) { _, _ = Copy(dst, src) }, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const total = 64 << 20
			b.SetBytes(total)
			var cpu time.Duration
			for b.Loop() {
				var wg sync.WaitGroup
				src, from := tcpPair(b)
				for range bc.hops {
					to, next := tcpPair(b)
					hopSrc := from
					wg.Go(func() { bc.hop(to, hopSrc); _ = to.(*net.TCPConn).CloseWrite() })
					from = next
				}
				c0 := cpuTime()
				wg.Go(func() {
					w := make([]byte, 16<<10)
					for sent := 0; sent < total; sent += len(w) {
						if _, err := src.Write(w); err != nil {
							return
						}
					}
					_ = src.(*net.TCPConn).CloseWrite()
				})
				if n, _ := io.Copy(io.Discard, struct{ io.Reader }{from}); n != total {
					b.Fatalf("read %d bytes, want %d", n, total)
				}
				cpu += cpuTime() - c0
				wg.Wait()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N*(total>>20)), "cpu-ms/MiB")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
