package tunnelwire

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"
)

// BatchRecords wraps the TLS transport credentials of the agent link's connections (both ends) so that what gRPC's
// transport writes at once leaves in one system call: crypto/tls writes each record of at most 16 KiB with a write
// of its own, so a flush of gRPC's write buffer (32 KiB, or a tunnel's frames) took two or more, each a trip through
// the kernel's TCP stack. The handshake is not batched.
func BatchRecords(c credentials.TransportCredentials) credentials.TransportCredentials {
	return batchRecords{c}
}

type batchRecords struct {
	credentials.TransportCredentials
}

func (b batchRecords) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	rb := &recordBatcher{Conn: raw}
	c, info, err := b.TransportCredentials.ClientHandshake(ctx, authority, rb)
	if err != nil {
		return nil, nil, err
	}
	return &batchedConn{Conn: c, records: rb}, info, nil
}

func (b batchRecords) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	rb := &recordBatcher{Conn: raw}
	c, info, err := b.TransportCredentials.ServerHandshake(rb)
	if err != nil {
		return nil, nil, err
	}
	return &batchedConn{Conn: c, records: rb}, info, nil
}

// Clone keeps the batching.
func (b batchRecords) Clone() credentials.TransportCredentials {
	return batchRecords{b.TransportCredentials.Clone()}
}

// batchedConn is the TLS connection over a recordBatcher: each Write's records are written together.
type batchedConn struct {
	net.Conn // the TLS connection
	records  *recordBatcher
}

func (c *batchedConn) Write(b []byte) (int, error) {
	c.records.start()
	n, err := c.Conn.Write(b)
	if ferr := c.records.flush(); err == nil {
		err = ferr
	}
	return n, err
}

// recordBatcher is the connection under TLS. Between start and flush it collects what TLS writes (the records of one
// Write, and whatever TLS writes meanwhile for its own reasons, such as a key update, in the order TLS wrote it) and
// writes it with one system call; otherwise it writes through.
type recordBatcher struct {
	net.Conn
	mu       sync.Mutex // orders writes: nothing written directly may overtake collected records
	batching int        // Writes of batchedConn between start and flush
	buf      *[]byte    // collected records, from batchBufs
}

const (
	// recordOverhead bounds what TLS adds to a record: the header, the AEAD's tag and nonce, the content type.
	recordOverhead = 64
	// batchSize holds the records of a write of WriteBufferSize, the most gRPC's transport writes at once.
	batchSize = WriteBufferSize + (WriteBufferSize/(16<<10)+1)*recordOverhead
)

// WriteBufferSize is the write buffer of the agent link's connections (grpc.WriteBufferSize, WithWriteBufferSize):
// gRPC's transport writes at most this much at once. gRPC takes it from a pool for each flush (write buffers are
// shared), so an idle connection holds none.
const WriteBufferSize = 64 << 10

// batchBufs are the recordBatchers' buffers, taken for one write.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}

// start begins collecting the records of a write.
func (r *recordBatcher) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batching++; r.buf == nil {
		r.buf = batchBufs.Get().(*[]byte)
	}
}

// flush writes what was collected once the last write in progress is done.
func (r *recordBatcher) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batching--; r.batching > 0 || r.buf == nil {
		return nil
	}
	bp := r.buf
	r.buf = nil
	var err error
	if len(*bp) > 0 {
		_, err = r.Conn.Write(*bp)
	}
	if cap(*bp) == batchSize { // not grown beyond: back to the pool
		*bp = (*bp)[:0]
		batchBufs.Put(bp)
	}
	return err
}

func (r *recordBatcher) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batching == 0 {
		return r.Conn.Write(b)
	}
	*r.buf = append(*r.buf, b...) // grows only for a write of more than WriteBufferSize
	return len(b), nil
}
