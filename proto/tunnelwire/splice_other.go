//go:build !linux

package tunnelwire

import "net"

// splice is Linux's; elsewhere Splice copies.
func splice(dst, src *net.TCPConn, progress func(int)) (int64, bool, error) { return 0, false, nil }

// PeekByte returns the first byte c's peer sent and a connection that reads it again, then c's bytes.
func PeekByte(c net.Conn) (byte, net.Conn, error) { return readByte(c) }
