package tunnelwire

import (
	"errors"
	"io"
	"net"
	"sync"

	"google.golang.org/grpc/mem"
)

// FrameSize is the most bytes one TunnelFrame carries: 64 KiB less what gRPC and protobuf add (the message's prefix,
// the field's tag and length), so that a full frame is four full HTTP/2 DATA frames. Each read of a socket is one
// system call for up to this much (fewer reads: on loopback a read costs as much as the TCP acknowledgement it sends).
const FrameSize = 64<<10 - frameOverhead

// frameOverhead is what a message of FrameSize bytes of Data adds: gRPC's 5-byte prefix, the field's tag (1) and
// length (3).
const frameOverhead = 5 + 1 + 3

// frameBufs are FrameSize buffers, taken for one read (of a socket, or of a frame from gRPC's buffers) and given back
// once its bytes are written.
var frameBufs = sync.Pool{New: func() any { return new([FrameSize]byte) }}

// Copy copies from src to dst until src ends (nil) or either fails, one read of at most FrameSize at a time. A read
// takes a buffer only once src has bytes, so that an idle tunnel holds none: with thousands of open, mostly idle
// tunnels (watches, exec sessions) the buffers would otherwise be most of their memory. A src that is not a socket is
// read with a buffer held while it waits.
func Copy(dst io.Writer, src net.Conn) (int64, error) {
	var n int64
	for {
		bp, m, rerr := read(src)
		var werr error
		if m > 0 {
			var w int
			w, werr = dst.Write(bp[:m])
			n += int64(w)
		}
		if bp != nil {
			frameBufs.Put(bp)
		}
		switch {
		case werr != nil:
			return n, werr
		case errors.Is(rerr, io.EOF):
			return n, nil
		case rerr != nil:
			return n, rerr
		}
	}
}

// readBlocking reads src into a buffer of frames, holding it while src has nothing to read.
func readBlocking(src net.Conn) (*[FrameSize]byte, int, error) {
	bp := frameBufs.Get().(*[FrameSize]byte)
	n, err := src.Read(bp[:])
	return bp, n, err
}

// BufferPool is the gRPC buffer pool (grpc.experimental.BufferPool, WithBufferPool) for the agent link's connections:
// gRPC's default pool zeroes every buffer it hands out, which was a tenth of the CPU time of a bulk tunnel, and every
// buffer it reads into is filled to its length before use.
var BufferPool mem.BufferPool = newPool(1<<8, 1<<12, 1<<14, 1<<15, 1<<16, 1<<20)

// pool is a tiered mem.BufferPool that does not zero its buffers.
type pool struct {
	sizes []int
	pools []sync.Pool
}

func newPool(sizes ...int) *pool {
	return &pool{sizes: sizes, pools: make([]sync.Pool, len(sizes))}
}

// tier is the index of the smallest size that holds n, len(p.sizes) for none.
func (p *pool) tier(n int) int {
	for i, s := range p.sizes {
		if n <= s {
			return i
		}
	}
	return len(p.sizes)
}

// Get returns a buffer of length n.
func (p *pool) Get(n int) *[]byte {
	i := p.tier(n)
	if i == len(p.sizes) {
		b := make([]byte, n)
		return &b
	}
	if bp, ok := p.pools[i].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, p.sizes[i])
	return &b
}

// Put takes a buffer back that Get returned.
func (p *pool) Put(bp *[]byte) {
	c := cap(*bp)
	i := p.tier(c)
	if i == len(p.sizes) || p.sizes[i] != c {
		return // not one of ours
	}
	p.pools[i].Put(bp)
}
