package store

import "context"

// WriteLimiter bounds how fast the writes made under a context reach etcd; golang.org/x/time/rate's Limiter is one.
type WriteLimiter interface {
	Wait(ctx context.Context) error
}

type writeLimiterKey struct{}

// WithWriteLimiter returns ctx whose writes (creates, updates, deletes; not reads, which the cache serves) each wait
// for l first, as a client-go client's requests wait for its rate limiter: the hub's loops write under one.
func WithWriteLimiter(ctx context.Context, l WriteLimiter) context.Context {
	return context.WithValue(ctx, writeLimiterKey{}, l)
}

// waitWrite waits for the write limiter of ctx, if any.
func waitWrite(ctx context.Context) error {
	if l, ok := ctx.Value(writeLimiterKey{}).(WriteLimiter); ok {
		return l.Wait(ctx)
	}
	return nil
}
