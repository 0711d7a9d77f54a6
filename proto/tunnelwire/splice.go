package tunnelwire

import (
	"io"
	"net"
)

// TCPConner is a connection that wraps a TCP connection and hands it out for Splice (the hub's data connections,
// which also end with their agent's session).
type TCPConner interface {
	TCP() *net.TCPConn
}

// tcpOf returns the TCP connection of c, nil when it has none.
func tcpOf(c any) *net.TCPConn {
	switch c := c.(type) {
	case *net.TCPConn:
		return c
	case TCPConner:
		return c.TCP()
	}
	return nil
}

// Splice copies from src to dst until src ends (nil) or either fails, calling progress with the count of each piece
// it moved (counters, idle timers). Between two TCP connections on Linux the bytes never enter user space: they move
// with splice(2) through a pooled pipe, each piece what src holds when it is asked (up to the pipe's capacity), and a
// wait holds neither pipe nor buffer. Otherwise a src that writes itself (io.WriterTo, a tunnel call's connection)
// does, and anything else is copied with Copy (also the rest of a splice that could get no pipe).
func Splice(dst, src net.Conn, progress func(int)) (int64, error) {
	if progress == nil {
		progress = func(int) {}
	}
	var spliced int64
	if d, s := tcpOf(dst), tcpOf(src); d != nil && s != nil {
		n, ok, err := splice(d, s, progress)
		if ok {
			return n, err
		}
		spliced = n
	}
	w := progressWriter{w: dst, progress: progress}
	if wt, ok := src.(io.WriterTo); ok && tcpOf(src) == nil {
		return wt.WriteTo(w)
	}
	n, err := Copy(w, src)
	return spliced + n, err
}

// progressWriter reports each write's count. It is a plain writer (no ReadFrom), so copies go through Write.
type progressWriter struct {
	w        io.Writer
	progress func(int)
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if n > 0 {
		p.progress(n)
	}
	return n, err
}

// readByte reads c's first byte and returns a connection that replays it.
func readByte(c net.Conn) (byte, net.Conn, error) {
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, c, err
	}
	return b[0], &replayConn{Conn: c, first: b[:]}, nil
}

// replayConn reads first, then its connection.
type replayConn struct {
	net.Conn
	first []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(b, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
