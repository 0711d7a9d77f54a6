//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package tunnelwire

import "net"

// read reads src into a buffer of frames, holding it while src has nothing to read.
func read(src net.Conn) (*[FrameSize]byte, int, error) { return readBlocking(src) }
