package tunnelwire

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// splice moves src's bytes to dst piece by piece: it waits (in the runtime's poller) until src has bytes or ends,
// asks the kernel how many it holds (FIONREAD) and moves exactly those with dst.ReadFrom, which splices. ok is false
// when src's descriptor is not reachable; nothing was moved then.
func splice(dst, src *net.TCPConn, progress func(int)) (n int64, ok bool, err error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	for {
		avail, err := readable(rc)
		if err != nil {
			return n, true, err
		}
		if avail == 0 { // the end of src
			return n, true, nil
		}
		m, err := io.Copy(dst, &io.LimitedReader{R: src, N: int64(avail)})
		n += m
		if m > 0 {
			progress(int(m))
		}
		if err != nil {
			return n, true, err
		}
		if m < int64(avail) { // src ended early (only a reset does that)
			return n, true, nil
		}
	}
}

// readable waits until the socket of rc has bytes to read (how many) or has ended (0); the read deadline and Close
// end the wait with their errors, as a Read's.
func readable(rc syscall.RawConn) (int, error) {
	var avail int
	var serr error
	err := rc.Read(func(fd uintptr) bool {
		for {
			var n int32
			if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
				serr = os.NewSyscallError("ioctl", e)
				return true
			}
			if n > 0 {
				avail = int(n)
				return true
			}
			// Nothing queued: the end of the stream, an error, or nothing yet. A peek tells which.
			var b [1]byte
			m, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(e, syscall.EINTR):
				continue
			case errors.Is(e, syscall.EAGAIN):
				return false // wait for the poller
			case e != nil:
				serr = os.NewSyscallError("recvfrom", e)
			default:
				avail = m // 0 at the end; 1 when bytes arrived meanwhile
			}
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	return avail, serr
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
