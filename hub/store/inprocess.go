package store

import (
	"context"
	"errors"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"google.golang.org/grpc"
)

// inProcessClient is the client of the embedded member: etcd's own in-process client (v3client), which calls the
// member's KV, lease, watch and maintenance services as functions instead of through its client listener, so a write
// or an event is not marshaled, framed, sent over the socket and parsed again on its way between the store and etcd
// (hub/store's BenchmarkCreate: about 30 % less time and half the allocations per create). The requests and events
// are the member's own objects; the store only reads them.
//
// Its watch streams send through a queue (queuedWatchClient): etcd's adapter hands a request to the member's receiving
// loop only when that loop takes it, and that loop waits for the member's sending loop, which waits for the client
// to read; the client's watcher reads and sends in one loop, so without the queue a burst of watch creations,
// cancellations and progress requests could leave all three waiting on each other, and every cache behind them.
func inProcessClient(s *etcdserver.EtcdServer) *clientv3.Client {
	c := v3client.New(s)
	c.Watcher = clientv3.NewWatchFromWatchClient(queuedWatchClient{adapter.WatchServerToWatchClient(v3rpc.NewWatchServer(s))}, c)
	return c
}

// queuedWatchClient opens watch streams whose Send never waits (queuedWatchStream).
type queuedWatchClient struct{ pb.WatchClient }

func (c queuedWatchClient) Watch(ctx context.Context, opts ...grpc.CallOption) (pb.Watch_WatchClient, error) {
	s, err := c.WatchClient.Watch(ctx, opts...)
	if err != nil {
		return nil, err
	}
	q := &queuedWatchStream{Watch_WatchClient: s, wake: make(chan struct{}, 1)}
	go q.forward() // ends with the stream (its context) or after CloseSend
	return q, nil
}

// errSendClosed is returned by Send after CloseSend, as a gRPC stream refuses it.
var errSendClosed = errors.New("store: watch stream: send after CloseSend")

// queuedWatchStream queues what the watcher sends and hands it to the member's stream in order from a goroutine of
// its own, so the watcher's loop goes on reading responses while the member has not taken a request yet.
type queuedWatchStream struct {
	pb.Watch_WatchClient
	wake chan struct{}

	mu      sync.Mutex
	queue   []*pb.WatchRequest
	closing bool  // CloseSend was called: close the member's side once the queue is sent
	err     error // why the stream stopped taking requests
}

func (q *queuedWatchStream) Send(r *pb.WatchRequest) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.err != nil:
		return q.err
	case q.closing:
		return errSendClosed
	}
	q.queue = append(q.queue, r)
	q.signal()
	return nil
}

func (q *queuedWatchStream) CloseSend() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing = true
	q.signal()
	return nil
}

// signal wakes forward; it runs under q.mu.
func (q *queuedWatchStream) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// forward sends the queued requests to the member's stream until the stream ends or, after CloseSend, the queue is
// empty.
func (q *queuedWatchStream) forward() {
	ctx := q.Context()
	for {
		q.mu.Lock()
		batch, closing := q.queue, q.closing
		q.queue = nil
		q.mu.Unlock()
		for _, r := range batch {
			if err := q.Watch_WatchClient.Send(r); err != nil {
				q.stop(err)
				return
			}
		}
		switch {
		case len(batch) > 0:
			continue
		case closing:
			q.stop(q.Watch_WatchClient.CloseSend())
			return
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			q.stop(ctx.Err())
			return
		}
	}
}

// stop makes every later Send fail with err (errSendClosed when err is nil) and drops what is queued.
func (q *queuedWatchStream) stop(err error) {
	if err == nil {
		err = errSendClosed
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
	}
	q.queue = nil
}
