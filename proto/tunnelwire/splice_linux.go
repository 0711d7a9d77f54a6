package tunnelwire

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// splice moves src's bytes to dst with splice(2) through a pipe, so that they never enter user space. Each round takes
// whatever src holds, up to the pipe's capacity, in one call and moves it on to dst (as many calls as dst's buffer
// needs), then asks src again at once: a stream moves without a wait, or a query of how much is queued, between two
// pieces. Only when src has nothing (EAGAIN) does the copy give its pipe back to the pool and wait in the runtime's
// poller, so a waiting copy holds no pipe. ok is false when the sockets cannot be spliced (nothing was moved then),
// or when no pipe could be had (n were moved, and none is held): the caller copies the rest.
//
// dst takes bytes only while it holds less than notSentLowat that it has not sent yet (TCP_NOTSENT_LOWAT), so a
// relay keeps its bytes moving instead of queuing megabytes in dst's send buffer for a peer that does not read.
func splice(dst, src *net.TCPConn, progress func(int)) (n int64, ok bool, err error) {
	srcRC, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	dstRC, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	_ = dstRC.Control(func(fd uintptr) { // best effort: without it the relay only queues more
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowat)
	})
	var p *pipe // held while bytes move; nil while src is waited for
	defer func() {
		if p != nil {
			p.release()
		}
	}()
	for {
		var in int
		var serr error
		unsupported, nopipe := false, false
		err := srcRC.Read(func(fd uintptr) bool {
			if p == nil {
				if p = getPipe(); p == nil {
					nopipe = true
					return true
				}
			}
			for {
				m, e := syscall.Splice(int(fd), nil, p.w, nil, maxSplice, spliceNonblock)
				switch {
				case errors.Is(e, syscall.EINTR):
					continue
				case errors.Is(e, syscall.EAGAIN):
					p.release() // empty: wait without it
					p = nil
					return false
				case errors.Is(e, syscall.EINVAL) && n == 0:
					unsupported = true
				case e != nil:
					serr = os.NewSyscallError("splice", e)
				}
				in = int(m) // 0 at the end of src
				return true
			}
		})
		switch {
		case nopipe:
			return n, false, nil
		case unsupported:
			return 0, false, nil
		case err != nil:
			return n, true, err
		case serr != nil:
			return n, true, serr
		case in == 0: // the end of src
			return n, true, nil
		}
		for in > 0 {
			var out int
			err := dstRC.Write(func(fd uintptr) bool {
				for {
					m, e := syscall.Splice(p.r, nil, int(fd), nil, in, spliceNonblock)
					switch {
					case errors.Is(e, syscall.EINTR):
						continue
					case errors.Is(e, syscall.EAGAIN):
						return false // dst's buffer is full: wait until it takes more
					case e != nil:
						serr = os.NewSyscallError("splice", e)
					}
					out = int(m)
					return true
				}
			})
			if err == nil {
				err = serr
			}
			if err != nil {
				p.discard() // it holds bytes that went nowhere
				p = nil
				return n, true, err
			}
			in -= out
			n += int64(out)
			progress(out)
		}
	}
}

const (
	// spliceNonblock is SPLICE_F_NONBLOCK: the pipe's side of a splice does not block either.
	spliceNonblock = 0x2
	// pipeSize is the capacity asked for each pipe (F_SETPIPE_SZ), the most one round moves. Unprivileged users
	// have 64 MiB of pipe capacity in all (fs.pipe-user-pages-soft) before the kernel hands out small pipes, and only
	// copies that are moving bytes hold one; 64 KiB (the default) up to 1 MiB measured the same on loopback.
	pipeSize = 256 << 10
	// maxSplice is the most asked of one splice from a socket; the pipe's capacity is what bounds it.
	maxSplice = 1 << 30
	// notSentLowat is the most a relay's destination holds unsent before the relay waits (TCP_NOTSENT_LOWAT; the
	// poller wakes it at half of that). It bounds what a tunnel queues in the kernel for a slow reader, which the
	// send buffer's autotuning would let grow to megabytes, without limiting what is in flight (the congestion and
	// receive windows still decide that, so it costs nothing on a long path). On loopback it also keeps a stream's
	// bytes in the cache between the relays: in test/bench/tunnel's streams the client's and target's CPU per MiB
	// through the tunnel fell to what a direct stream costs (docs/benchmarks.md).
	notSentLowat = 512 << 10
)

// pipe is a pipe for splicing, from pipes. Its descriptors are closed once it is garbage (a pool drops what it
// holds at garbage collections).
type pipe struct {
	r, w    int
	cleanup runtime.Cleanup
}

var pipes = sync.Pool{New: func() any {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil
	}
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[1]), syscall.F_SETPIPE_SZ, pipeSize) // else the default
	p := &pipe{r: fds[0], w: fds[1]}
	p.cleanup = runtime.AddCleanup(p, closePipe, fds)
	return p
}}

// getPipe returns an empty pipe, nil when none can be made (out of descriptors).
func getPipe() *pipe {
	p, _ := pipes.Get().(*pipe)
	return p
}

// release gives an empty pipe back to the pool.
func (p *pipe) release() { pipes.Put(p) }

// discard closes a pipe that holds bytes.
func (p *pipe) discard() {
	p.cleanup.Stop()
	closePipe([2]int{p.r, p.w})
}

func closePipe(fds [2]int) {
	_ = syscall.Close(fds[0])
	_ = syscall.Close(fds[1])
}

// PeekByte returns the first byte c's peer sent without consuming it, waiting until the read deadline, and the
// connection to read from afterwards: c itself for a TCP connection (whose later reads still see the byte, and which
// stays a *net.TCPConn for the TLS stack's socket options), else one that replays the byte.
func PeekByte(c net.Conn) (byte, net.Conn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return readByte(c)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return readByte(c)
	}
	var b [1]byte
	var n int
	var serr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			m, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(e, syscall.EINTR):
				continue
			case errors.Is(e, syscall.EAGAIN):
				return false
			case e != nil:
				serr = os.NewSyscallError("recvfrom", e)
			case m == 0:
				serr = io.EOF
			}
			n = m
			return true
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil || n == 0 {
		return 0, c, err
	}
	return b[0], c, nil
}
