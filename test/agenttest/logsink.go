package agenttest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// LogSink is a slog.Handler that keeps every record, at every level, for assertions on what an agent or a hub
// logged and for the log of a failed test. With -v and TRELLIS_TEST_LOGS set the records also go to stderr.
type LogSink struct {
	mu     *sync.Mutex
	recs   *[]LogRecord
	attrs  []slog.Attr
	stderr slog.Handler
}

// LogRecord is a record a LogSink kept.
type LogRecord struct {
	Time  time.Time
	Level slog.Level
	Msg   string
	// Attrs are the record's attributes and those of its logger, by key, resolved.
	Attrs map[string]slog.Value
}

// NewLogSink returns an empty LogSink.
func NewLogSink() *LogSink {
	return &LogSink{mu: &sync.Mutex{}, recs: &[]LogRecord{}, stderr: stderrLogs()}
}

// Enabled implements slog.Handler: every level.
func (s *LogSink) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (s *LogSink) Handle(ctx context.Context, r slog.Record) error {
	rec := LogRecord{Time: r.Time, Level: r.Level, Msg: r.Message, Attrs: map[string]slog.Value{}}
	for _, a := range s.attrs {
		rec.Attrs[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve()
		return true
	})
	s.mu.Lock()
	*s.recs = append(*s.recs, rec)
	s.mu.Unlock()
	if s.stderr != nil {
		return s.stderr.Handle(ctx, r)
	}
	return nil
}

// WithAttrs implements slog.Handler; the records of the new handler go to the same sink.
func (s *LogSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *s
	c.attrs = append(append([]slog.Attr(nil), s.attrs...), attrs...)
	if s.stderr != nil {
		c.stderr = s.stderr.WithAttrs(attrs)
	}
	return &c
}

// WithGroup implements slog.Handler; groups are ignored, as nobody logs them here.
func (s *LogSink) WithGroup(string) slog.Handler { return s }

// Records returns the records with message msg, all with msg "".
func (s *LogSink) Records(msg string) []LogRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LogRecord
	for _, r := range *s.recs {
		if msg == "" || r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// String is the log as text, at most its last 500 records.
func (s *LogSink) String() string {
	recs := s.Records("")
	if len(recs) > 500 {
		recs = recs[len(recs)-500:]
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s %q", r.Time.Format("15:04:05.000"), r.Level, r.Msg)
		for _, k := range slices.Sorted(maps.Keys(r.Attrs)) {
			fmt.Fprintf(&b, " %s=%q", k, r.Attrs[k].String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}
