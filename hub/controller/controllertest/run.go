package controllertest

import (
	"context"
	"testing"
)

// Runner is what runs until its context ends: a controller, or a group of them.
type Runner interface {
	Run(ctx context.Context) error
}

// Start runs r in the background until stop is called or the test ends; stop waits for r to return and may be
// called more than once.
func Start(t testing.TB, r Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}
