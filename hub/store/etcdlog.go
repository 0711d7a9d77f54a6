package store

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core writing to a slog.Logger, so etcd's server and client logs follow the injected logger.
// Errors etcd reports about its own shutdown, once the store is closing, and known-benign start-up errors are
// demoted to debug.
type slogCore struct {
	log     *slog.Logger
	level   zapcore.Level
	attrs   []any
	closing *atomic.Bool
}

func newSlogCore(log *slog.Logger, level zapcore.Level, closing *atomic.Bool) zapcore.Core {
	return &slogCore{log: log, level: level, closing: closing}
}

// benign are messages etcd logs at error level in normal operation.
var benign = map[string]bool{
	// A fresh member logs this until its first raft term is persisted; it retries by itself.
	"failed to update storage version": true,
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.level }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, level: c.level, closing: c.closing,
		attrs: append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() || benign[e.Message] {
		if c.log.Enabled(context.Background(), slog.LevelDebug) {
			return ce.AddCore(e, c)
		}
		return ce
	}
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slog.LevelInfo
	switch {
	case c.closing.Load() || benign[e.Message]:
		level = slog.LevelDebug
	case e.Level >= zap.ErrorLevel:
		level = slog.LevelError
	case e.Level >= zap.WarnLevel:
		level = slog.LevelWarn
	case e.Level < zap.InfoLevel:
		level = slog.LevelDebug
	}
	attrs := append(append([]any(nil), c.attrs...), fieldAttrs(fields)...)
	if e.LoggerName != "" {
		attrs = append(attrs, "logger", e.LoggerName)
	}
	c.log.Log(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func fieldAttrs(fields []zapcore.Field) []any {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, k, v)
	}
	return out
}
