package tracing

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Annotation is the annotation through which the agent hands the trace of a shoot operation to the extension that
// reconciles an extension object. Only the agent writes it, on objects in the seed, which users of the hub cannot
// write; extsdk reads it and continues the trace.
const Annotation = "trellis.dev/traceparent"

// Config configures tracing.
type Config struct {
	// Enabled turns tracing on. Off, Setup installs nothing and spans cost a no-op.
	Enabled bool
	// ServiceName names the process in its spans (service.name): trellis-hub, trellis-agent, provider-local.
	ServiceName string
	// Endpoint is the OTLP gRPC collector's host:port; empty leaves it to OTEL_EXPORTER_OTLP(_TRACES)_ENDPOINT and
	// the exporter's default (localhost:4317). The other OTEL_EXPORTER_OTLP_* variables (headers, TLS, timeout)
	// apply as the exporter reads them.
	Endpoint string
	// Insecure sends without TLS (OTEL_EXPORTER_OTLP_INSECURE=true does as well).
	Insecure bool
	// SamplingRatio is the share of new traces that are sampled, in [0, 1]; a span whose parent was sampled is
	// sampled, so a trace stays whole across processes.
	SamplingRatio float64
}

// Validate names the field that is wrong.
func (c Config) Validate() error {
	if c.SamplingRatio < 0 || c.SamplingRatio > 1 {
		return fmt.Errorf("tracing sampling ratio %v: must be between 0 and 1", c.SamplingRatio)
	}
	return nil
}

// Setup installs the global TracerProvider and the W3C trace context propagator for cfg, and returns the function
// that flushes and stops them. With tracing off it installs nothing and returns a no-op.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	if !cfg.Enabled {
		return func(context.Context) error { return nil }, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var opts []otlptracegrpc.Option
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SamplingRatio))),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// enabled is whether Setup installed a TracerProvider (and its shutdown has not run).
var enabled atomic.Bool

// Enabled says whether tracing is on in this process (Setup installed a TracerProvider). Servers leave their tracing
// middleware out when it is off, so that tracing costs nothing then: no span contexts, propagator reads or wrapped
// response writers per request.
func Enabled() bool { return enabled.Load() }

// Traceparent is the W3C traceparent of the span in ctx; "" when ctx holds no sampled span.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx with the remote span context of traceparent as the parent of new spans; ctx itself
// when traceparent is empty or malformed (tracing is best effort, a bad header only loses the link).
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Index remembers the traceparent of the writes of recent revisions, so that the agent link can send each
// assignment with the trace of the request that wrote that version. It is bounded (the oldest entries go first)
// and in memory: after a hub restart or a failover the older revisions' traces are not continued.
type Index struct {
	mu    sync.Mutex
	byRev map[int64]string
	order []int64 // ring of the revisions in byRev
	next  int
	// pending holds the traceparents of each object's writes in flight (Begin), by ObjectKey: the write's revision is
	// known only once etcd committed it, and the watch may deliver the new version before the writer recorded it.
	pending map[string][]pendingWrite
	seq     uint64
}

type pendingWrite struct {
	traceparent string
	seq         uint64
}

// ObjectKey names an object for Begin and LookupObject: its resource ("shoots.core.gardener.cloud", as
// schema.GroupResource prints it), namespace and name.
func ObjectKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

// Begin notes traceparent for the object's write that is about to be committed, until end is called: LookupObject
// answers it for a revision not recorded yet, so a watcher that sees the commit before the writer records it still
// continues the trace. end(rev) records traceparent for the committed revision rev; end(0) (the write failed)
// records nothing. Nothing when traceparent is empty.
//
// Writes of one object may overlap (the hub's loops write the same shoot at once): each stays pending until its own
// end, so a write that lost the compare-and-swap and ends first does not hide the winner's, which a watcher (and the
// loser, deciding again on the winner's version) may already see.
func (x *Index) Begin(key, traceparent string) (end func(rev int64)) {
	if x == nil || traceparent == "" {
		return func(int64) {}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.pending == nil {
		x.pending = map[string][]pendingWrite{}
	}
	x.seq++
	seq := x.seq
	x.pending[key] = append(x.pending[key], pendingWrite{traceparent: traceparent, seq: seq})
	return func(rev int64) {
		if rev > 0 {
			x.put(rev, traceparent)
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		writes := slices.DeleteFunc(x.pending[key], func(w pendingWrite) bool { return w.seq == seq })
		if len(writes) == 0 {
			delete(x.pending, key)
		} else {
			x.pending[key] = writes
		}
	}
}

// LookupObject is Lookup, or while rev is not recorded yet the traceparent of the object's write in flight (Begin):
// of several, the one begun last.
func (x *Index) LookupObject(rev int64, key string) string {
	if x == nil {
		return ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if tp, ok := x.byRev[rev]; ok {
		return tp
	}
	if writes := x.pending[key]; len(writes) > 0 {
		return writes[len(writes)-1].traceparent
	}
	return ""
}

// NewIndex returns an index of at most size revisions.
func NewIndex(size int) *Index {
	if size < 1 {
		panic(errors.New("tracing: index size must be positive"))
	}
	return &Index{byRev: make(map[int64]string, size), order: make([]int64, size)}
}

// Record notes the traceparent of ctx for rev; nothing when ctx holds no sampled span.
func (x *Index) Record(ctx context.Context, rev int64) {
	if x == nil {
		return
	}
	x.put(rev, Traceparent(ctx))
}

// Carry gives rev the traceparent recorded for prev, the version it replaced: a write that does not ask for work
// (status, labels, finalizers) keeps the trace of the write that did, instead of lending its own to the work. Nothing
// when prev has none.
func (x *Index) Carry(rev, prev int64) {
	if x == nil {
		return
	}
	x.put(rev, x.Lookup(prev))
}

func (x *Index) put(rev int64, tp string) {
	if tp == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byRev, x.order[x.next])
	x.order[x.next] = rev
	x.next = (x.next + 1) % len(x.order)
	x.byRev[rev] = tp
}

// Lookup is the traceparent recorded for rev, or "".
func (x *Index) Lookup(rev int64) string {
	if x == nil {
		return ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.byRev[rev]
}

// AddFlags registers the flags of cfg on fs: --tracing, --tracing-endpoint, --tracing-insecure and
// --tracing-sampling-ratio (default 1).
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "tracing", c.Enabled, "export OpenTelemetry traces over OTLP gRPC (OTEL_EXPORTER_OTLP_* apply)")
	fs.StringVar(&c.Endpoint, "tracing-endpoint", c.Endpoint, "host:port of the OTLP gRPC collector (default: OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317)")
	fs.BoolVar(&c.Insecure, "tracing-insecure", c.Insecure, "send traces without TLS")
	if c.SamplingRatio == 0 {
		c.SamplingRatio = 1
	}
	fs.Float64Var(&c.SamplingRatio, "tracing-sampling-ratio", c.SamplingRatio, "share of new traces sampled, 0 to 1; children of sampled spans are always sampled")
}
