package resource

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Client calls a kind's service with untyped objects; errors are the gRPC errors of the hub.
type Client interface {
	Get(ctx context.Context, req *metav1.GetRequest) (proto.Message, error)
	List(ctx context.Context, req *metav1.ListRequest) ([]proto.Message, *metav1.ListMeta, error)
	Watch(ctx context.Context, req *metav1.WatchRequest) (Watcher, error)
	Create(ctx context.Context, obj proto.Message) (proto.Message, error)
	Update(ctx context.Context, obj proto.Message) (proto.Message, error)
	Patch(ctx context.Context, req *metav1.PatchRequest) (proto.Message, error)
	Delete(ctx context.Context, req *metav1.DeleteRequest) (proto.Message, error)
}

// Watcher receives the events of a watch until its context ends or the hub closes the stream (io.EOF).
type Watcher interface {
	Recv() (Event, error)
}

// Event is one watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object.
type Event struct {
	Type   string
	Object proto.Message
}

// Service is the client of a kind's service as protoc-gen-go-grpc generates it: T is the kind's message, L its
// <Kind>List and E its <Kind>WatchEvent.
type Service[T proto.Message, L any, E any] interface {
	Get(context.Context, *metav1.GetRequest, ...grpc.CallOption) (T, error)
	List(context.Context, *metav1.ListRequest, ...grpc.CallOption) (L, error)
	Watch(context.Context, *metav1.WatchRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[E], error)
	Create(context.Context, T, ...grpc.CallOption) (T, error)
	Update(context.Context, T, ...grpc.CallOption) (T, error)
	Patch(context.Context, *metav1.PatchRequest, ...grpc.CallOption) (T, error)
	Delete(context.Context, *metav1.DeleteRequest, ...grpc.CallOption) (T, error)
}

// list is what the CLI reads of a <Kind>List.
type list[T any] interface {
	GetItems() []T
	GetMetadata() *metav1.ListMeta
}

// event is what the CLI reads of a <Kind>WatchEvent; PE is its pointer type.
type event[E any, T any] interface {
	*E
	GetType() string
	GetObject() T
}

// NewClient adapts a generated service client to Client. The generated kinds call it as
// NewClient[*Shoot, *ShootList, ShootWatchEvent](NewShootServiceClient(conn)).
func NewClient[T proto.Message, L list[T], E any, PE event[E, T]](s Service[T, L, E]) Client {
	return typed[T, L, E, PE]{s: s}
}

type typed[T proto.Message, L list[T], E any, PE event[E, T]] struct {
	s Service[T, L, E]
}

func (c typed[T, L, E, PE]) Get(ctx context.Context, req *metav1.GetRequest) (proto.Message, error) {
	return message(c.s.Get(ctx, req))
}

func (c typed[T, L, E, PE]) List(ctx context.Context, req *metav1.ListRequest) ([]proto.Message, *metav1.ListMeta, error) {
	l, err := c.s.List(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	items := l.GetItems()
	out := make([]proto.Message, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out, l.GetMetadata(), nil
}

func (c typed[T, L, E, PE]) Watch(ctx context.Context, req *metav1.WatchRequest) (Watcher, error) {
	st, err := c.s.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	return watcher[T, E, PE]{st: st}, nil
}

func (c typed[T, L, E, PE]) Create(ctx context.Context, obj proto.Message) (proto.Message, error) {
	o, err := as[T](obj)
	if err != nil {
		return nil, err
	}
	return message(c.s.Create(ctx, o))
}

func (c typed[T, L, E, PE]) Update(ctx context.Context, obj proto.Message) (proto.Message, error) {
	o, err := as[T](obj)
	if err != nil {
		return nil, err
	}
	return message(c.s.Update(ctx, o))
}

func (c typed[T, L, E, PE]) Patch(ctx context.Context, req *metav1.PatchRequest) (proto.Message, error) {
	return message(c.s.Patch(ctx, req))
}

func (c typed[T, L, E, PE]) Delete(ctx context.Context, req *metav1.DeleteRequest) (proto.Message, error) {
	return message(c.s.Delete(ctx, req))
}

type watcher[T proto.Message, E any, PE event[E, T]] struct {
	st grpc.ServerStreamingClient[E]
}

func (w watcher[T, E, PE]) Recv() (Event, error) {
	e, err := w.st.Recv()
	if err != nil {
		return Event{}, err
	}
	pe := PE(e)
	return Event{Type: pe.GetType(), Object: pe.GetObject()}, nil
}

// Call invokes a unary RPC of a generated client with in, which must be of the RPC's request type. The generated
// subresources call it as Call(ctx, in, NewShootServiceClient(conn).UpdateStatus).
func Call[I, O proto.Message](ctx context.Context, in proto.Message, rpc func(context.Context, I, ...grpc.CallOption) (O, error)) (proto.Message, error) {
	req, err := as[I](in)
	if err != nil {
		return nil, err
	}
	return message(rpc(ctx, req))
}

// message returns a typed result as proto.Message, and no typed nil with an error.
func message[T proto.Message](m T, err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

func as[T proto.Message](m proto.Message) (T, error) {
	t, ok := m.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("resource: got a %T, want a %T", m, zero)
	}
	return t, nil
}
