//go:build linux || darwin || freebsd || netbsd || openbsd

package tunnelwire

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// read reads what src has into a buffer of frames and returns the buffer (nil when there is none to give back), how
// many bytes it holds and the read's error. On a socket it takes the buffer only for the read system call, after the
// runtime's poller reported bytes (or the end): a waiting read holds no buffer. The read deadline and Close end a
// wait with their errors, as Read's.
func read(src net.Conn) (*[FrameSize]byte, int, error) {
	sc, ok := src.(syscall.Conn)
	if !ok {
		return readBlocking(src)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return readBlocking(src)
	}
	var (
		bp   *[FrameSize]byte
		n    int
		rerr error
	)
	err = rc.Read(func(fd uintptr) bool {
		b := frameBufs.Get().(*[FrameSize]byte)
		for {
			m, err := syscall.Read(int(fd), b[:])
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN):
				frameBufs.Put(b) // nothing yet: wait for the poller without the buffer
				return false
			case err != nil:
				rerr = os.NewSyscallError("read", err)
			case m == 0:
				rerr = io.EOF
			}
			bp, n = b, max(m, 0)
			return true
		}
	})
	if err != nil {
		return nil, 0, err
	}
	return bp, n, rerr
}
