package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/trellis-dev/trellis/hub/store"
)

// recorder records an event about an object; *controller.Recorder is one (synchronous), eventSink another.
type recorder interface {
	Eventf(ctx context.Context, obj store.Object, eventType, reason, format string, args ...any)
}

// eventQueue is how many events may wait to be written.
const eventQueue = 1024

// eventSink writes events off the scheduling workers' path, as client-go's recorder (which Gardener's scheduler
// uses) does: a bounded queue drained by writer goroutines, so a bind does not wait for its event's write. Unlike
// client-go's, a full queue makes the worker wait instead of dropping the event: under load scheduling slows down
// to the pace of the event writes rather than losing events. Events still queued when the context ends are dropped.
type eventSink struct {
	rec     recorder
	writers int
	log     *slog.Logger
	queue   chan queuedEvent
	waited  atomic.Int64
}

type queuedEvent struct {
	obj                        store.Object
	eventType, reason, message string
}

func newEventSink(rec recorder, writers int, log *slog.Logger) *eventSink {
	return &eventSink{rec: rec, writers: max(writers, 1), log: log, queue: make(chan queuedEvent, eventQueue)}
}

// Eventf queues an event, waiting while the queue is full (until ctx ends); obj must not be modified afterwards.
func (s *eventSink) Eventf(ctx context.Context, obj store.Object, eventType, reason, format string, args ...any) {
	ev := queuedEvent{obj: obj, eventType: eventType, reason: reason, message: fmt.Sprintf(format, args...)}
	select {
	case s.queue <- ev:
		return
	default:
	}
	if n := s.waited.Add(1); n == 1 || n%1000 == 0 {
		s.log.Debug("event queue full; scheduling waits for the event writes", "times", n)
	}
	select {
	case s.queue <- ev:
	case <-ctx.Done():
	}
}

// run writes queued events until ctx ends.
func (s *eventSink) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.writers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-s.queue:
					if ctx.Err() != nil {
						return
					}
					s.rec.Eventf(ctx, ev.obj, ev.eventType, ev.reason, "%s", ev.message)
				}
			}
		})
	}
	wg.Wait()
}
