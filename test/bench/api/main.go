package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/time/rate"

	"github.com/trellis-dev/trellis/test/bench/benchcmd"
	"github.com/trellis-dev/trellis/test/bench/procstat"
	"github.com/trellis-dev/trellis/test/binproc"
)

const (
	namespace     = "garden-dev"
	shootsPath    = "/apis/core.gardener.cloud/v1beta1/namespaces/" + namespace + "/shoots"
	groupLabel    = "bench.trellis.dev/group"
	groups        = 10 // the label selector of the list phase matches 1/groups of the shoots
	genLabel      = "bench.trellis.dev/generation"
	statusLabel   = "shoot.gardener.cloud/status"
	sentAtAnno    = "bench.trellis.dev/sent-at"
	patchLabel    = "bench.trellis.dev/patched"
	patchAnno     = "bench.trellis.dev/patched-at"
	minShootBytes = 8000
	maxShootBytes = 10240
)

// Budgets from DESIGN.md (Budgets, 2 cores, loopback). The throughput budgets are 5× the kube-apiserver + etcd numbers
// recorded there (create 290/s, get 910/s, update 230/s, delete 360/s); the list budget is 20× faster than that
// peer's 690 ms for 2,000 shoots, and < 100 ms for 10,000.
var opsBudget = map[string]float64{"create": 5 * 290, "get": 5 * 910, "update": 5 * 230, "delete": 5 * 360}

const (
	startupBudget = 2 * time.Second
	watchBudget   = 5 * time.Millisecond // p99 update sent → event received
)

func listBudget(n int) time.Duration {
	if n <= 2000 {
		return 690 * time.Millisecond / 20
	}
	return 100 * time.Millisecond
}

type config struct {
	hubBin       string
	n, c         int
	watchUpdates int
	watchRate    float64
	lists        int
	out          string
	seed         uint64
	phaseLimit   time.Duration
	timeout      time.Duration
	keep         bool
	auditLevel   string
	// peer runs the workload against kube-apiserver + etcd from testbin too; loops against a second hub with its
	// scheduler and controllers on.
	peer, loops bool
	// loopsFlags are more flags for the hubs with their loops on (e.g. "--loop-qps 50").
	loopsFlags string
	testbin    string
	// compare is another hub binary (an earlier build) run as targets "before" (and "before+loops" with loops).
	compare string
	// cpuprofile is a directory for the hubs' CPU profiles of the write and list phases, profileFor their length.
	cpuprofile string
	profileFor time.Duration
}

func (c *config) validate() error {
	var errs []error
	if c.n < groups {
		errs = append(errs, fmt.Errorf("-n must be at least %d", groups))
	}
	if c.n > 100000 {
		errs = append(errs, errors.New("-n must be at most 100000"))
	}
	if c.c < 1 || c.c > 256 {
		errs = append(errs, errors.New("-c must be between 1 and 256"))
	}
	if c.watchUpdates < 1 {
		errs = append(errs, errors.New("-watch-updates must be positive"))
	}
	if c.watchRate < 0 {
		errs = append(errs, errors.New("-watch-rate must not be negative"))
	}
	if c.lists < 1 || c.lists > 1000 {
		errs = append(errs, errors.New("-lists must be between 1 and 1000"))
	}
	switch c.auditLevel {
	case "", "None", "Metadata", "Request", "RequestResponse":
	default:
		errs = append(errs, fmt.Errorf("-audit-level %q: must be None, Metadata, Request or RequestResponse", c.auditLevel))
	}
	if c.cpuprofile != "" && (c.profileFor < time.Second || c.profileFor > time.Minute) {
		errs = append(errs, errors.New("-profile-seconds must be between 1s and 1m"))
	}
	if c.phaseLimit <= 0 || c.timeout <= 0 {
		errs = append(errs, errors.New("-phase-limit and -timeout must be positive"))
	}
	return errors.Join(errs...)
}

func main() {
	var cfg config
	flag.StringVar(&cfg.hubBin, "hub", "bin/trellis-hub", "hub binary to start")
	flag.IntVar(&cfg.n, "n", 10000, "number of shoots")
	flag.IntVar(&cfg.c, "c", 16, "concurrent HTTP/2 clients, one connection each")
	flag.IntVar(&cfg.watchUpdates, "watch-updates", 2000, "updates whose watch latency is measured (at most -n)")
	flag.Float64Var(&cfg.watchRate, "watch-rate", 0, "PUTs per second of the watch phase, spread over the clients (0: as fast as the clients go, which measures the watch under a saturating write load; a rate the target keeps up with measures delivery without queueing)")
	flag.IntVar(&cfg.lists, "lists", 10, "lists of the whole collection, and as many with a label selector")
	flag.StringVar(&cfg.out, "out", "", "write the results as JSON to this file")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the random choices")
	flag.DurationVar(&cfg.phaseLimit, "phase-limit", 5*time.Minute, "time limit of each phase")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "time limit of the whole run")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the hub's data dir and log")
	flag.StringVar(&cfg.auditLevel, "audit-level", "", "audit every request at this level to a file beside the hub's log (None, Metadata, Request, RequestResponse; empty: no audit log)")
	flag.BoolVar(&cfg.peer, "peer", false, "run the same workload against kube-apiserver + etcd from -testbin serving a Shoot CRD, phase by phase in turn with the hub, and print the ratios")
	flag.BoolVar(&cfg.loops, "loops", false, "run the same workload against a second hub with its scheduler and controllers on (3 seeds, the shoots unschedulable), in turn with the hub with its loops off, and print the ratios")
	flag.StringVar(&cfg.loopsFlags, "loops-flags", "", "more flags for the hubs with their loops on, separated by spaces (e.g. \"--loop-qps 50\")")
	flag.StringVar(&cfg.compare, "compare", "", "another hub binary (an earlier build) to run the same workload against in the same run, as target \"before\" (and \"before+loops\" with -loops)")
	flag.StringVar(&cfg.testbin, "testbin", "bin/testbin", "directory with etcd and kube-apiserver for -peer")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "directory for CPU profiles of the hubs during the write phases (create, update, patch, delete), the get phase and the list phase, from their /debug/pprof/profile")
	flag.DurationVar(&cfg.profileFor, "profile-seconds", 5*time.Second, "length of each -cpuprofile profile, from the start of its phase")
	tracing := flag.Bool("tracing", false, "run the hub with tracing at 100 % sampling, exporting to a span sink in the benchmark")
	flag.Parse()
	if *tracing {
		s, addr, stop, err := startSink()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		stopSink = func() { stop(); fmt.Fprintf(os.Stderr, "tracing: %d spans exported to the sink\n", s.spans.Load()) }
		tracingArgs = []string{"--tracing", "--tracing-insecure", "--tracing-endpoint", addr, "--tracing-sampling-ratio", "1"}
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.watchUpdates = min(cfg.watchUpdates, cfg.n)
	if cfg.cpuprofile != "" {
		// The profiles are written at the end of each phase: a directory that cannot be made fails the run now.
		if err := os.MkdirAll(cfg.cpuprofile, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "-cpuprofile: %v\n", err)
			os.Exit(2)
		}
	}

	// The run prints its report and writes the JSON itself: printing needs the benchmark's state.
	benchcmd.Main("bench-api", cfg.timeout, "", func(ctx context.Context) (benchcmd.Report, bool, error) {
		failed, err := run(ctx, cfg)
		stopSink()
		return nil, failed, err
	})
}

// loopsOff are the hub's flags that turn its scheduler and controller-manager loops off: a --controllers list
// naming only a disabled controller enables none (kube-controller-manager's reading of the flag).
var loopsOff = []string{"--disable-scheduler", "--controllers", "-event"}

// run returns failed when some operation failed; err when the benchmark could not run at all.
func run(ctx context.Context, cfg config) (failed bool, err error) {
	bin, err := filepath.Abs(cfg.hubBin)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(bin); err != nil {
		return false, fmt.Errorf("hub binary: %w (build it with `go build -o bin/ ./cmd/...`)", err)
	}
	dir, err := os.MkdirTemp("", "trellis-bench-api-")
	if err != nil {
		return false, err
	}
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.stop()
		}
		if cfg.keep {
			fmt.Printf("kept %s (hub logs: %s)\n", dir, filepath.Join(dir, "*", "hub.log"))
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	// The watch replays the updates and patches from the revision after the creates: the hubs keep enough events.
	window := []string{"--watch-window", strconv.Itoa(max(10000, 2*cfg.n+cfg.watchUpdates))}
	var benches []*bench
	addHub := func(name, bin string, loops bool) error {
		hdir := filepath.Join(dir, name)
		if err := os.MkdirAll(hdir, 0o700); err != nil {
			return err
		}
		args, err := auditArgs(hdir, cfg.auditLevel)
		if err != nil {
			return err
		}
		args = append(append(args, tracingArgs...), window...)
		prereqs := prerequisites
		if loops {
			prereqs = loopsPrerequisites
			args = append(args, strings.Fields(cfg.loopsFlags)...)
		} else {
			args = append(args, loopsOff...)
		}
		h, err := startHub(ctx, bin, hdir, args)
		if err != nil {
			return err
		}
		t := hubTarget(name, h, loops, prereqs)
		targets = append(targets, t)
		rep := newReport(cfg, name)
		rep.StartupMs, rep.StartupBudgetMs, rep.StartupOK = ms(h.Startup), ms(startupBudget), h.Startup < startupBudget
		fmt.Printf("%s: %s started (pid %d) at %s: ready after %s (budget < %s: %s)\n",
			name, bin, h.PID(), h.URL, h.Startup.Round(time.Microsecond), startupBudget, verdict(rep.StartupOK))
		benches = append(benches, newBench(cfg, t, rep))
		return nil
	}
	if err := addHub("hub", bin, false); err != nil {
		return false, err
	}
	if cfg.loops {
		if err := addHub("hub+loops", bin, true); err != nil {
			return false, err
		}
	}
	if cfg.compare != "" {
		before, err := filepath.Abs(cfg.compare)
		if err != nil {
			return false, err
		}
		if err := addHub("before", before, false); err != nil {
			return false, err
		}
		if cfg.loops {
			if err := addHub("before+loops", before, true); err != nil {
				return false, err
			}
		}
	}
	if cfg.peer {
		t, err := startPeer(dir, cfg.testbin)
		if err != nil {
			return false, err
		}
		targets = append(targets, t)
		benches = append(benches, newBench(cfg, t, newReport(cfg, t.name)))
	}
	for _, b := range benches {
		if err := b.setup(ctx); err != nil {
			return false, fmt.Errorf("%s: %w", b.t.name, err)
		}
	}
	// Each phase runs against every target in turn, so that the machine's load (shared with others) hits them alike.
	for _, st := range steps {
		for _, b := range benches {
			if len(benches) > 1 {
				fmt.Printf("%s:\n", b.t.name)
			}
			t0 := time.Now()
			b.profile(ctx, st.name, func() { st.run(b, ctx) })
			b.rep.Elapsed += time.Since(t0)
		}
	}
	out := runReport{}
	for _, b := range benches {
		b.finishRun()
		b.print()
		out.Targets = append(out.Targets, b.rep)
		failed = failed || b.rep.Errors > 0 || !b.rep.ShootSizeOK
	}
	if len(benches) > 1 {
		out.Ratios = ratios(benches)
		printRatios(out.Ratios)
	}
	if cfg.out != "" {
		if err := benchcmd.WriteJSON(cfg.out, out); err != nil {
			return false, err
		}
		fmt.Printf("results written to %s\n", cfg.out)
	}
	return failed, nil
}

// runReport is what -out writes: the report of each target and, with more than one, their ratios.
type runReport struct {
	Targets []*report  `json:"targets"`
	Ratios  []ratioRow `json:"ratios,omitempty"`
}

func newReport(cfg config, name string) *report {
	return &report{
		Target: name, N: cfg.n, C: cfg.c, WatchUpdates: cfg.watchUpdates, WatchRate: cfg.watchRate, Lists: cfg.lists, Seed: cfg.seed,
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
	}
}

func newBench(cfg config, t *target, rep *report) *bench {
	return &bench{cfg: cfg, t: t, rep: rep, rv: make([]atomic.Int64, cfg.n), ackAt: make([]atomic.Int64, cfg.n)}
}

// finishRun completes the report after the last phase.
func (b *bench) finishRun() {
	b.rep.HubRSSBytes, b.rep.HubPeakRSSBytes = b.t.rss()
	b.rep.HubLogProblems = b.t.logProblems(5)
	for _, p := range b.rep.Phases {
		b.rep.Errors += p.Errors
	}
}

// ---- the hub process ----

// hubProc is the hub under test.
type hubProc struct{ *binproc.Hub }

// startHub runs the hub on a data dir and log in dir and a free loopback port (another if that one is taken
// meanwhile), without the gRPC-only listener, and waits until /readyz answers 200.
func startHub(ctx context.Context, bin, dir string, args []string) (*hubProc, error) {
	h, err := binproc.StartHub(ctx, binproc.HubConfig{Bin: bin, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "hub.log"),
		Args: append([]string{"--grpc-listen", ""}, args...)})
	if err != nil {
		return nil, err
	}
	return &hubProc{h}, nil
}

// tracingArgs are the hub's flags of -tracing; stopSink ends -tracing's span sink.
var (
	tracingArgs []string
	stopSink    = func() {}
)

// auditArgs are the hub's flags for an audit log at level (none for ""): a one-rule policy and a file in dir.
func auditArgs(dir, level string) ([]string, error) {
	if level == "" {
		return nil, nil
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: "+level+"\n"), 0o600); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file", policy, "--audit-log-path", filepath.Join(dir, "audit.log")}, nil
}

// stop ends the hub with SIGTERM, and SIGKILL when it has not exited after 15 s.
func (h *hubProc) stop() {
	if err := h.Stop(15 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// logProblems returns the count and the first few of the hub's warning and error log lines.
func (h *hubProc) logProblems(keep int) logProblems {
	n, first := h.Problems(keep)
	return logProblems{Count: n, First: first}
}

// machineCPU is the busy CPU time of the whole machine so far. Minus the hub's and the benchmark's own, it shows how
// much other processes took while a phase ran.
func machineCPU() time.Duration { return procstat.Machine() }

// selfCPU is this process's user+system CPU time, to show what the load generator takes of the machine.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ---- clients ----

// client is one HTTP/2 client with its own connection to the hub.
type client struct {
	http  *http.Client
	url   string
	token string
	rnd   *rand.Rand
	wire  atomic.Int64 // bytes read from the connection
}

// do sends one request and reads the whole response.
func (c *client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return c.doType(ctx, method, path, "", body)
}

// doType is do with the body's content type (the default's when contentType is empty).
func (c *client) doType(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	if contentType != "" {
		return c.doHeaders(ctx, method, path, body, "Content-Type", contentType)
	}
	return c.doHeaders(ctx, method, path, body)
}

// doHeaders is do with more request headers, name and value in turn.
func (c *client) doHeaders(ctx context.Context, method, path string, body []byte, headers ...string) (int, []byte, error) {
	req, err := binproc.Request(ctx, method, c.url+path, c.token, body)
	if err != nil {
		return 0, nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, out, err
	}
	if resp.ProtoMajor != 2 {
		return resp.StatusCode, out, fmt.Errorf("%s %s: answered over %s, want HTTP/2", method, path, resp.Proto)
	}
	return resp.StatusCode, out, nil
}

// expect turns an unexpected status into an error carrying the start of the body (a Kubernetes Status).
func expect(method, path string, code int, body []byte, err error, want ...int) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if slices.Contains(want, code) {
		return nil
	}
	if len(body) > 300 {
		body = body[:300]
	}
	return fmt.Errorf("%s %s: %d %s", method, path, code, bytes.TrimSpace(body))
}

// ---- results ----

type report struct {
	Target          string        `json:"target"`
	N               int           `json:"n"`
	C               int           `json:"c"`
	WatchUpdates    int           `json:"watchUpdates"`
	WatchRate       float64       `json:"watchRate,omitempty"`
	Lists           int           `json:"lists"`
	Seed            uint64        `json:"seed"`
	GoVersion       string        `json:"goVersion"`
	CPUs            int           `json:"cpus"`
	StartupMs       float64       `json:"startupMs"`
	StartupBudgetMs float64       `json:"startupBudgetMs"`
	StartupOK       bool          `json:"startupOK"`
	ShootBytes      shootBytes    `json:"shootBytes"`
	ShootSizeOK     bool          `json:"shootSizeOK"`
	Phases          []*phase      `json:"phases"`
	ListSamples     []listSample  `json:"listSamples"`
	Watch           watchReport   `json:"watch"`
	HubRSSBytes     int64         `json:"hubRSSBytes"`
	HubPeakRSSBytes int64         `json:"hubPeakRSSBytes"`
	HubLogProblems  logProblems   `json:"hubLogProblems"`
	Errors          int           `json:"errors"`
	Elapsed         time.Duration `json:"-"`
}

type shootBytes struct {
	Min      int `json:"min"`
	Max      int `json:"max"`
	Mean     int `json:"mean"`
	Returned int `json:"returned"` // the created object as the hub answered it (with uid, timestamps, defaults)
}

type phase struct {
	Name        string   `json:"name"`
	Ops         int      `json:"ops"`
	Errors      int      `json:"errors"`
	Incomplete  int      `json:"incomplete,omitempty"` // not run because the phase's time limit passed
	Seconds     float64  `json:"seconds"`
	OpsPerSec   float64  `json:"opsPerSec"`
	P50Ms       float64  `json:"p50Ms"`
	P90Ms       float64  `json:"p90Ms"`
	P99Ms       float64  `json:"p99Ms"`
	MaxMs       float64  `json:"maxMs"`
	HubCPUSec   float64  `json:"hubCPUSeconds"`
	BenchCPUSec float64  `json:"benchCPUSeconds"`
	OtherCPUSec float64  `json:"otherCPUSeconds"` // other processes on the machine meanwhile
	HubRSSBytes int64    `json:"hubRSSBytesAfter"`
	Budget      string   `json:"budget,omitempty"`
	BudgetOK    *bool    `json:"budgetOK,omitempty"`
	FirstErrors []string `json:"firstErrors,omitempty"`
	Note        string   `json:"note,omitempty"`
}

type listSample struct {
	Selector string  `json:"selector,omitempty"`
	Ms       float64 `json:"ms"`
	Items    int     `json:"items"`
	Bytes    int     `json:"bytes"`
	// WireBytes is what the client read from its connection for the list (TLS records of the answer, compressed
	// when it was), Gzip whether it asked for gzip.
	WireBytes int64 `json:"wireBytes"`
	Gzip      bool  `json:"gzip"`
}

type watchReport struct {
	FromResourceVersion int64   `json:"fromResourceVersion"`
	ReplayEvents        int     `json:"replayEvents"`
	ReplayExpected      int     `json:"replayExpected"`
	ReplayMs            float64 `json:"replayMs"`
	LiveEvents          int     `json:"liveEvents"`
	LiveExpected        int     `json:"liveExpected"`
	// AfterAck is event received − PUT answer received: the watch's own delay, without the write's (negative when
	// the event came first).
	AfterAckP50Ms float64        `json:"afterAckP50Ms"`
	AfterAckP99Ms float64        `json:"afterAckP99Ms"`
	EventTypes    map[string]int `json:"eventTypes"`
	StreamError   string         `json:"streamError,omitempty"`
}

type logProblems struct {
	Count int      `json:"count"`
	First []string `json:"first,omitempty"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// recorder collects one phase's latencies and errors from many workers.
type recorder struct {
	mu     sync.Mutex
	lat    []time.Duration
	errs   int
	first  []string
	ops    int
	notRun int
}

func (r *recorder) add(lat []time.Duration, errs []error, ops int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = append(r.lat, lat...)
	r.ops += ops
	for _, err := range errs {
		r.errs++
		if len(r.first) < 5 {
			r.first = append(r.first, err.Error())
		}
	}
}

func (r *recorder) phase(name string, wall time.Duration) *phase {
	slices.Sort(r.lat)
	p := &phase{Name: name, Ops: r.ops, Errors: r.errs + r.notRun, Incomplete: r.notRun, Seconds: wall.Seconds(), FirstErrors: r.first}
	if r.notRun > 0 {
		p.FirstErrors = append(p.FirstErrors, fmt.Sprintf("%d operations not run (the phase's time limit passed, or an earlier step failed)", r.notRun))
	}
	if wall > 0 {
		p.OpsPerSec = math.Round(float64(r.ops-r.errs)/wall.Seconds()*10) / 10
	}
	p.P50Ms, p.P90Ms, p.P99Ms = ms(quantile(r.lat, 0.50)), ms(quantile(r.lat, 0.90)), ms(quantile(r.lat, 0.99))
	if len(r.lat) > 0 {
		p.MaxMs = ms(r.lat[len(r.lat)-1])
	}
	return p
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ---- the benchmark ----

type bench struct {
	cfg     config
	t       *target
	rep     *report
	clients []*client
	bodies  [][]byte       // create bodies, by shoot index
	rv      []atomic.Int64 // current resourceVersion, by shoot index
	ackAt   []atomic.Int64 // when the answer to the stamped PUT arrived (UnixNano), by shoot index
	gen     []int          // value of the generation label, by shoot index (each index is owned by one worker per phase)
	// rvAfterCreates is the highest resourceVersion the creates answered: the watch starts there.
	// conflicts counts the PUTs answered 409 and sent again.
	conflicts      atomic.Int64
	rvAfterCreates atomic.Int64
}

func shootName(i int) string { return fmt.Sprintf("bench-%05d", i) }

// setup creates what a Shoot needs, builds the shoots' bodies and checks their size and that every client speaks
// HTTP/2.
func (b *bench) setup(ctx context.Context) error {
	for i := 0; i < b.cfg.c; i++ {
		b.clients = append(b.clients, b.t.newClient(i, b.cfg.seed, 60*time.Second))
	}
	admin := b.clients[0]
	for _, p := range b.t.prerequisites() {
		code, body, err := admin.do(ctx, http.MethodPost, p.path, mustJSON(p.obj))
		if err := expect("POST", p.path, code, body, err, http.StatusCreated); err != nil {
			return fmt.Errorf("prerequisites: %w", err)
		}
	}
	for _, c := range b.clients {
		code, body, err := c.do(ctx, http.MethodGet, "/api/v1/namespaces/"+namespace, nil)
		if err := expect("GET", "/api/v1/namespaces/"+namespace, code, body, err, http.StatusOK); err != nil {
			return err
		}
	}

	b.bodies = make([][]byte, b.cfg.n)
	b.gen = make([]int, b.cfg.n)
	sz := shootBytes{Min: math.MaxInt}
	total := 0
	for i := range b.bodies {
		b.bodies[i] = mustJSON(shoot(i))
		n := len(b.bodies[i])
		sz.Min, sz.Max, total = min(sz.Min, n), max(sz.Max, n), total+n
	}
	sz.Mean = total / b.cfg.n
	b.rep.ShootBytes = sz
	b.rep.ShootSizeOK = sz.Min >= minShootBytes && sz.Max <= maxShootBytes
	fmt.Printf("shoot size (compact JSON as sent): min %d, mean %d, max %d bytes (want %d..%d: %s)\n",
		sz.Min, sz.Mean, sz.Max, minShootBytes, maxShootBytes, verdict(b.rep.ShootSizeOK))
	if !b.rep.ShootSizeOK {
		return errors.New("shoot size outside the wanted range")
	}
	return nil
}

// step is one phase of the workload.
type step struct {
	name string
	run  func(b *bench, ctx context.Context)
}

// steps are the phases in order; each runs against every target before the next.
var steps = []step{
	{"create", (*bench).createPhase},
	{"get", (*bench).getPhase},
	{"update", (*bench).updatePhase},
	{"patch", (*bench).patchPhase},
	{"list", (*bench).listPhase},
	{"watch", (*bench).watchStep},
	{"apply", (*bench).applyPhase},
	{"delete", (*bench).deletePhase},
}

// watchStep runs the watch phase. The hub with its loops off is watched from the revision after the creates, so the
// watch first replays the updates and patches from its window. kube-apiserver's watch cache keeps fewer events (410
// Expired), and the loops write the shoots besides the workload: those are watched from the collection's current
// revision (a list of one item), with nothing to replay. Not from the last revision the workload saw: the loops
// write meanwhile (a few thousand events during the list phase), and the stamped PUTs, which start at once when
// nothing is to be replayed, would queue behind those events at the start of the stream.
func (b *bench) watchStep(ctx context.Context) {
	from := b.rvAfterCreates.Load()
	if b.t.hub == nil || b.t.loops {
		for i := range b.rv {
			from = max(from, b.rv[i].Load())
		}
		p := shootsPath + "?limit=1"
		code, body, err := b.clients[0].do(ctx, http.MethodGet, p, nil)
		if err = expect("GET", p, code, body, err, http.StatusOK); err == nil {
			var rv int64
			if rv, err = resourceVersion(body); err == nil {
				from = max(from, rv)
			}
		}
		if err != nil {
			fmt.Printf("watch: the collection's revision unknown (%v); watching from the workload's last, %d\n", err, from)
		}
	}
	b.watchPhase(ctx, from)
}

func (b *bench) createPhase(ctx context.Context) {
	var returned atomic.Int64
	b.runPhase(ctx, "create", b.cfg.n, func(ctx context.Context, c *client, i int) error {
		code, body, err := c.do(ctx, http.MethodPost, shootsPath, b.bodies[i])
		if err := expect("POST", shootsPath, code, body, err, http.StatusCreated); err != nil {
			return err
		}
		rv, err := resourceVersion(body)
		if err != nil {
			return fmt.Errorf("POST %s: %w", shootName(i), err)
		}
		b.rv[i].Store(rv)
		storeMax(&b.rvAfterCreates, rv)
		returned.CompareAndSwap(0, int64(len(body)))
		return nil
	})
	b.rep.ShootBytes.Returned = int(returned.Load())
	fmt.Printf("created shoot as returned by %s: %d bytes\n", b.t.name, b.rep.ShootBytes.Returned)
}

func (b *bench) getPhase(ctx context.Context) {
	n := b.cfg.n
	b.runPhase(ctx, "get", n, func(ctx context.Context, c *client, _ int) error {
		i := c.rnd.IntN(n)
		p := shootsPath + "/" + shootName(i)
		code, body, err := c.do(ctx, http.MethodGet, p, nil)
		if err := expect("GET", p, code, body, err, http.StatusOK); err != nil {
			return err
		}
		if !bytes.Contains(body, []byte(`"name":"`+shootName(i)+`"`)) {
			return fmt.Errorf("GET %s: the answer is not that shoot", p)
		}
		return nil
	})
}

// updatePhase PUTs every shoot once, in random order.
func (b *bench) updatePhase(ctx context.Context) {
	order := rand.New(rand.NewPCG(b.cfg.seed, 99)).Perm(b.cfg.n)
	b.runPhase(ctx, "update", b.cfg.n, func(ctx context.Context, c *client, k int) error {
		return b.update(ctx, c, order[k], false)
	})
}

// patchPhase sends every shoot a JSON merge patch setting a label and an annotation, in another random order.
func (b *bench) patchPhase(ctx context.Context) {
	order := rand.New(rand.NewPCG(b.cfg.seed, 98)).Perm(b.cfg.n)
	b.runPhase(ctx, "patch", b.cfg.n, func(ctx context.Context, c *client, k int) error {
		i := order[k]
		p := shootsPath + "/" + shootName(i)
		patch := []byte(`{"metadata":{"labels":{"` + patchLabel + `":"p` + strconv.Itoa(i) + `"},"annotations":{"` + patchAnno + `":"` + strconv.FormatInt(time.Now().UnixNano(), 10) + `"}}}`)
		code, resp, err := c.do(ctx, http.MethodPatch, p, patch)
		if err := expect("PATCH", p, code, resp, err, http.StatusOK); err != nil {
			return err
		}
		if !bytes.Contains(resp, []byte(`"`+patchLabel+`":"p`+strconv.Itoa(i)+`"`)) {
			return fmt.Errorf("PATCH %s: the answer lacks the patched label", p)
		}
		rv, err := resourceVersion(resp)
		if err != nil {
			return fmt.Errorf("PATCH %s: %w", p, err)
		}
		b.rv[i].Store(rv)
		return nil
	})
}

// applyPhase server-side applies every shoot once, in the update's order, the whole shoot with the next generation
// label (forced: the fields belong to the creator's Update entry), to compare with the update phase's PUTs; after the
// watch phase, whose replay counts the update phase's events.
func (b *bench) applyPhase(ctx context.Context) {
	order := rand.New(rand.NewPCG(b.cfg.seed, 99)).Perm(b.cfg.n)
	b.runPhase(ctx, "apply", b.cfg.n, func(ctx context.Context, c *client, k int) error {
		return b.apply(ctx, c, order[k])
	})
}

// deletePhase deletes every shoot and checks that none is left.
func (b *bench) deletePhase(ctx context.Context) {
	b.runPhase(ctx, "delete", b.cfg.n, func(ctx context.Context, c *client, i int) error {
		p := shootsPath + "/" + shootName(i)
		code, body, err := c.do(ctx, http.MethodDelete, p, nil)
		return expect("DELETE", p, code, body, err, http.StatusOK, http.StatusAccepted)
	})
	// With the loops on, deleted shoots wait for the loops to drop their finalizers (reference protection): the
	// check waits up to finalizeWait for that and reports how long it took.
	const finalizeWait = 2 * time.Minute
	start := time.Now()
	for {
		left, err := b.count(ctx)
		if err == nil && left != 0 && b.t.loops && time.Since(start) < finalizeWait && ctx.Err() == nil {
			time.Sleep(time.Second)
			continue
		}
		if err == nil && left != 0 {
			err = fmt.Errorf("%d shoots left after the delete phase (%s)", left, time.Since(start).Round(time.Second))
		}
		if err != nil {
			b.rep.Errors++
			fmt.Printf("ERROR: %s: list after delete: %v\n", b.t.name, err)
		} else if b.t.loops {
			fmt.Printf("  %s: the loops finalized the deleted shoots %s after the delete phase\n", b.t.name, time.Since(start).Round(time.Second))
		}
		return
	}
}

// count lists the shoots and counts them.
func (b *bench) count(ctx context.Context) (int, error) {
	code, body, err := b.clients[0].do(ctx, http.MethodGet, shootsPath, nil)
	if err = expect("GET", shootsPath, code, body, err, http.StatusOK); err != nil {
		return 0, err
	}
	var left struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &left); err != nil {
		return 0, err
	}
	return len(left.Items), nil
}

// update PUTs shoot i with the next generation label, the status label flipped and its current resourceVersion;
// stamp also sets the sent-at annotation to the time of sending. On a conflict (the hub's loops wrote the shoot
// meanwhile) it reads the shoot's resourceVersion and tries again, as client-go's RetryOnConflict does, up to
// maxConflicts times; the operation's latency includes the retries.
func (b *bench) update(ctx context.Context, c *client, i int, stamp bool) error {
	const maxConflicts = 5
	b.gen[i]++
	tmpl := bytes.Replace(b.bodies[i], []byte(`"`+genLabel+`":"0"`), []byte(`"`+genLabel+`":"`+strconv.Itoa(b.gen[i])+`"`), 1)
	tmpl = bytes.Replace(tmpl, []byte(`"`+statusLabel+`":"healthy"`), []byte(`"`+statusLabel+`":"progressing"`), 1)
	p := shootsPath + "/" + shootName(i)
	for attempt := 0; ; attempt++ {
		body := bytes.Replace(tmpl, []byte(`"metadata":{`), []byte(`"metadata":{"resourceVersion":"`+strconv.FormatInt(b.rv[i].Load(), 10)+`",`), 1)
		if stamp {
			body = bytes.Replace(body, []byte(`"`+sentAtAnno+`":"0"`), []byte(`"`+sentAtAnno+`":"`+strconv.FormatInt(time.Now().UnixNano(), 10)+`"`), 1)
		}
		code, resp, err := c.do(ctx, http.MethodPut, p, body)
		if err == nil && code == http.StatusConflict && attempt < maxConflicts {
			b.conflicts.Add(1)
			code, resp, err := c.do(ctx, http.MethodGet, p, nil)
			if err := expect("GET", p, code, resp, err, http.StatusOK); err != nil {
				return err
			}
			rv, err := resourceVersion(resp)
			if err != nil {
				return fmt.Errorf("GET %s: %w", p, err)
			}
			b.rv[i].Store(rv)
			continue
		}
		if err := expect("PUT", p, code, resp, err, http.StatusOK); err != nil {
			return err
		}
		if stamp {
			b.ackAt[i].Store(time.Now().UnixNano())
		}
		if !bytes.Contains(resp, []byte(`"`+genLabel+`":"`+strconv.Itoa(b.gen[i])+`"`)) {
			return fmt.Errorf("PUT %s: the answer lacks the changed label", p)
		}
		rv, err := resourceVersion(resp)
		if err != nil {
			return fmt.Errorf("PUT %s: %w", p, err)
		}
		b.rv[i].Store(rv)
		return nil
	}
}

// apply server-side applies shoot i with the next generation label as field manager bench, forced.
func (b *bench) apply(ctx context.Context, c *client, i int) error {
	b.gen[i]++
	body := bytes.Replace(b.bodies[i], []byte(`"`+genLabel+`":"0"`), []byte(`"`+genLabel+`":"`+strconv.Itoa(b.gen[i])+`"`), 1)
	p := shootsPath + "/" + shootName(i) + "?fieldManager=bench&force=true"
	code, resp, err := c.doType(ctx, http.MethodPatch, p, "application/apply-patch+yaml", body)
	if err := expect("PATCH", p, code, resp, err, http.StatusOK); err != nil {
		return err
	}
	if !bytes.Contains(resp, []byte(`"`+genLabel+`":"`+strconv.Itoa(b.gen[i])+`"`)) {
		return fmt.Errorf("apply %s: the answer lacks the changed label", p)
	}
	rv, err := resourceVersion(resp)
	if err != nil {
		return fmt.Errorf("apply %s: %w", p, err)
	}
	b.rv[i].Store(rv)
	return nil
}

// runPhase runs op for 0..n-1 on all clients, each client one operation at a time, within the phase time limit.
func (b *bench) runPhase(ctx context.Context, name string, n int, op func(ctx context.Context, c *client, i int) error) *phase {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.phaseLimit)
	defer cancel()
	snap := b.snapshot()
	conflicts0 := b.conflicts.Load()
	var next atomic.Int64
	rec := &recorder{}
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range b.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n/len(b.clients)+1)
			var errs []error
			ops := 0
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					break
				}
				t0 := time.Now()
				err := op(ctx, c, i)
				d := time.Since(t0)
				ops++
				if err != nil {
					errs = append(errs, err)
					continue
				}
				lat = append(lat, d)
			}
			rec.add(lat, errs, ops)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	rec.notRun = n - rec.ops
	p := rec.phase(name, wall)
	b.finish(p, snap)
	if want, ok := opsBudget[name]; ok {
		ok := p.Errors == 0 && p.OpsPerSec >= want
		p.Budget, p.BudgetOK = fmt.Sprintf("≥ %.0f/s", want), &ok
	}
	if d := b.conflicts.Load() - conflicts0; d > 0 {
		p.Note = fmt.Sprintf("%d PUTs answered 409 Conflict, read again and retried", d)
	}
	fmt.Printf("  %-8s done: %d ops, %d errors, %.1f/s %s\n", name, p.Ops, p.Errors, p.OpsPerSec, p.Note)
	return p
}

// cpuSnapshot is the CPU time of the hub, the benchmark and the machine at the start of a phase.
type cpuSnapshot struct{ hub, bench, machine time.Duration }

func (b *bench) snapshot() cpuSnapshot {
	return cpuSnapshot{hub: b.t.cpu(), bench: selfCPU(), machine: machineCPU()}
}

func (b *bench) finish(p *phase, s cpuSnapshot) {
	now := b.snapshot()
	hub, bench := now.hub-s.hub, now.bench-s.bench
	p.HubCPUSec = hub.Seconds()
	p.BenchCPUSec = math.Round(bench.Seconds()*100) / 100
	p.OtherCPUSec = math.Round(max(0, (now.machine-s.machine-hub-bench).Seconds())*100) / 100
	p.HubRSSBytes, _ = b.t.rss()
	b.rep.Phases = append(b.rep.Phases, p)
}

// listPhase lists the whole collection and then a tenth of it by label selector, -lists times each, one list at a
// time. The latency is the time to the last byte of the answer; the items are counted outside of it.
func (b *bench) listPhase(ctx context.Context) {
	// As kubectl and client-go by default (Accept-Encoding: gzip, decompressed by Go's transport), then without
	// compression, as Kubernetes' control-plane components ask on local networks (rest.Config.DisableCompression).
	plain := b.t.newClient(len(b.clients), b.cfg.seed, 60*time.Second)
	plain.http.Transport.(*http.Transport).DisableCompression = true
	defer plain.http.CloseIdleConnections()
	for _, variant := range []struct {
		c      *client
		suffix string
	}{{b.clients[0], ""}, {plain, "-plain"}} {
		b.listVariant(ctx, variant.c, variant.suffix)
	}
	b.tableVariant(ctx, b.clients[0], 0)
	b.tableVariant(ctx, b.clients[0], 500)
}

// tableAccept is what kubectl get asks for: a Table of meta.k8s.io v1, else v1beta1, else the plain JSON.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// tableVariant lists the whole collection -lists times as kubectl get shoots does: as a Table, gzip accepted, in one
// answer (phase list-table) or, with chunk > 0, in pages of chunk rows following the continue tokens as kubectl's
// default --chunk-size=500 does (phase list-table-<chunk>); each list must have a row per shoot.
func (b *bench) tableVariant(ctx context.Context, c *client, chunk int) {
	name := "list-table"
	if chunk > 0 {
		name = fmt.Sprintf("list-table-%d", chunk)
	}
	snap := b.snapshot()
	rec := &recorder{}
	start := time.Now()
	for k := 0; k < b.cfg.lists && ctx.Err() == nil && time.Since(start) < b.cfg.phaseLimit; k++ {
		// The time to the last byte of the last page; the pages' rows are counted outside of it.
		t0 := time.Now()
		var bodies [][]byte
		cont, err := "", error(nil)
		for page := 0; err == nil && (page == 0 || cont != ""); page++ {
			p := shootsPath
			if chunk > 0 {
				p += fmt.Sprintf("?limit=%d", chunk)
				if cont != "" {
					p += "&continue=" + url.QueryEscape(cont)
				}
			}
			code, body, e := c.doHeaders(ctx, http.MethodGet, p, nil, "Accept", tableAccept)
			if err = expect("GET", p, code, body, e, http.StatusOK); err == nil {
				bodies = append(bodies, body)
				cont, err = tableContinue(body)
			}
			if chunk == 0 {
				break
			}
		}
		d := time.Since(t0)
		rows := 0
		for _, body := range bodies {
			n, _, e := tableRows(body)
			if err == nil {
				err = e
			}
			rows += n
		}
		if err == nil && rows != b.cfg.n {
			err = fmt.Errorf("%s: %d rows, want %d", name, rows, b.cfg.n)
		}
		if err != nil {
			rec.add(nil, []error{err}, 1)
		} else {
			rec.add([]time.Duration{d}, nil, 1)
		}
	}
	rec.notRun = b.cfg.lists - rec.ops
	ph := rec.phase(name, time.Since(start))
	b.finish(ph, snap)
	ph.Note = "ops/s = lists/s, one client, as kubectl get asks (a Table, gzip accepted)"
	if chunk > 0 {
		ph.Note += fmt.Sprintf(", pages of %d", chunk)
	}
	fmt.Printf("  %-8s done: %d lists, %d errors, p50 %.1f ms\n", ph.Name, ph.Ops, ph.Errors, ph.P50Ms)
}

// tableContinue reads the continue token of a Table from its metadata, which comes before its rows, as a client
// that asks for the next page before it has read the rows of this one.
func tableContinue(body []byte) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if _, err := dec.ReadToken(); err != nil {
		return "", err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return "", err
		}
		if name.String() != "metadata" {
			if err := dec.SkipValue(); err != nil {
				return "", err
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return "", err
		}
		var md struct {
			Continue string `json:"continue"`
		}
		return md.Continue, json.Unmarshal(v, &md)
	}
	return "", errors.New("a Table without metadata")
}

// tableRows checks that body is a Table whose rows each name a shoot in their first cell, and returns how many rows it
// has and its continue token.
func tableRows(body []byte) (int, string, error) {
	var t struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
		Rows []struct {
			Cells []any `json:"cells"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return 0, "", fmt.Errorf("decode table: %w", err)
	}
	if t.Kind != "Table" {
		return 0, "", fmt.Errorf("table: kind %q", t.Kind)
	}
	for _, r := range t.Rows {
		if name, _ := r.Cells[0].(string); len(r.Cells) < 2 || !strings.HasPrefix(name, shootName(0)[:6]) {
			return 0, "", fmt.Errorf("table row %v: no shoot's name first", r.Cells)
		}
	}
	return len(t.Rows), t.Metadata.Continue, nil
}

func (b *bench) listVariant(ctx context.Context, c *client, suffix string) {
	for _, sel := range []bool{false, true} {
		name := "list-all" + suffix
		if sel {
			name = "list-10%" + suffix
		}
		snap := b.snapshot()
		rec := &recorder{}
		start := time.Now()
		fullBytes := 0
		for k := 0; k < b.cfg.lists && ctx.Err() == nil && time.Since(start) < b.cfg.phaseLimit; k++ {
			p, want, selector := shootsPath, b.cfg.n, ""
			if sel {
				g := k % groups
				selector = fmt.Sprintf("%s=g%d", groupLabel, g)
				p += "?labelSelector=" + selector
				want = (b.cfg.n - g + groups - 1) / groups // indices i < n with i % groups == g
			}
			wire0 := c.wire.Load()
			t0 := time.Now()
			code, body, err := c.do(ctx, http.MethodGet, p, nil)
			d := time.Since(t0)
			wire := c.wire.Load() - wire0
			err = expect("GET", p, code, body, err, http.StatusOK)
			items := -1
			if err == nil {
				// Whole lists are identical (nothing is written meanwhile): count the items of the first, compare the
				// size of the others. Selector lists are small enough to count every time.
				if sel || fullBytes == 0 || b.t.loops { // the loops write shoots meanwhile
					items, err = countItems(body, want)
					fullBytes = len(body)
				} else if len(body) != fullBytes {
					err = fmt.Errorf("GET %s: %d bytes, the first list had %d", p, len(body), fullBytes)
				} else {
					items = want
				}
			}
			if err != nil {
				rec.add(nil, []error{err}, 1)
			} else {
				rec.add([]time.Duration{d}, nil, 1)
			}
			b.rep.ListSamples = append(b.rep.ListSamples, listSample{Selector: selector, Ms: ms(d), Items: items, Bytes: len(body),
				WireBytes: wire, Gzip: suffix == ""})
		}
		rec.notRun = b.cfg.lists - rec.ops
		ph := rec.phase(name, time.Since(start))
		b.finish(ph, snap)
		if !sel {
			budget := listBudget(b.cfg.n)
			ok := ph.Errors == 0 && time.Duration(ph.P50Ms*1e6) < budget
			ph.Budget, ph.BudgetOK = fmt.Sprintf("p50 < %s", budget), &ok
		}
		ph.Note = "ops/s = lists/s, one client"
		if suffix != "" {
			ph.Note += ", no compression"
		} else {
			ph.Note += ", gzip accepted"
		}
		fmt.Printf("  %-8s done: %d lists, %d errors, p50 %.1f ms\n", name, ph.Ops, ph.Errors, ph.P50Ms)
	}
}

// countItems counts the items of a ShootList and checks there are want of them.
func countItems(body []byte, want int) (int, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, fmt.Errorf("decode list: %w", err)
	}
	if len(list.Items) != want {
		return len(list.Items), fmt.Errorf("list: %d items, want %d", len(list.Items), want)
	}
	return len(list.Items), nil
}

// watchPhase watches the collection from rvFrom (the resourceVersion after the creates): the watcher first replays
// the update phase, then -watch-updates PUTs stamped with their send time are measured until their events arrive.
func (b *bench) watchPhase(ctx context.Context, rvFrom int64) {
	wr := &b.rep.Watch
	wr.FromResourceVersion = rvFrom
	wr.EventTypes = map[string]int{}
	var rvAfterUpdates int64
	for i := range b.rv {
		rvAfterUpdates = max(rvAfterUpdates, b.rv[i].Load())
	}
	if rvAfterUpdates > rvFrom {
		wr.ReplayExpected = 2*b.cfg.n - b.phaseErrors("update") - b.phaseErrors("patch")
	}

	ctx, cancel := context.WithTimeout(ctx, b.cfg.phaseLimit)
	defer cancel()
	snap := b.snapshot()
	w := &watcher{caughtUpAt: rvAfterUpdates, caughtUp: make(chan struct{}), live: make(chan liveEvent, b.cfg.watchUpdates*2), done: make(chan struct{})}
	if rvAfterUpdates <= rvFrom { // nothing to replay
		w.startCaught = true
		close(w.caughtUp)
	}
	wc := b.t.newClient(b.cfg.c, b.cfg.seed, 0) // no client timeout: the context bounds the stream
	p := fmt.Sprintf("%s?watch=true&resourceVersion=%d", shootsPath, rvFrom)
	start := time.Now()
	go w.run(ctx, wc, p)

	rec := &recorder{}
	fail := func(err error) {
		rec.add(nil, []error{err}, 0)
	}
	select {
	case <-w.caughtUp:
		wr.ReplayMs = ms(time.Since(start))
	case <-w.done:
	case <-time.After(60 * time.Second):
	}
	w.mu.Lock()
	wr.ReplayEvents = w.replayed
	w.mu.Unlock()
	select {
	case <-w.caughtUp:
	default:
		fail(fmt.Errorf("watch from %d did not replay to %d within 60s (%d events seen): %s", rvFrom, rvAfterUpdates, wr.ReplayEvents, w.errText()))
		rec.notRun = b.cfg.watchUpdates
		b.finishWatch(rec, time.Since(start), snap, w)
		return
	}
	if wr.ReplayEvents != wr.ReplayExpected && !b.t.loops { // the loops write the shoots too
		fail(fmt.Errorf("watch replay: %d events, want %d", wr.ReplayEvents, wr.ReplayExpected))
	}

	// The stamped updates: distinct shoots chosen at random, sent by all clients.
	pick := rand.New(rand.NewPCG(b.cfg.seed, 7)).Perm(b.cfg.n)[:b.cfg.watchUpdates]
	var sent atomic.Int64
	pace := rate.NewLimiter(rate.Inf, 0)
	if b.cfg.watchRate > 0 {
		pace = rate.NewLimiter(rate.Limit(b.cfg.watchRate), 1)
	}
	upd := b.runPhase(ctx, "watch-put", len(pick), func(ctx context.Context, c *client, k int) error {
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		if err := b.update(ctx, c, pick[k], true); err != nil {
			return err
		}
		sent.Add(1)
		return nil
	})
	upd.Note = strings.TrimSpace("the PUTs of the watch phase; " + upd.Note)
	wr.LiveExpected = int(sent.Load())

	var lat, afterAck []time.Duration
	got := func(ev liveEvent) {
		lat = append(lat, ev.recvAt.Sub(ev.sent))
		if i, err := strconv.Atoi(strings.TrimPrefix(ev.name, "bench-")); err == nil && i >= 0 && i < len(b.ackAt) {
			if ack := b.ackAt[i].Load(); ack != 0 {
				afterAck = append(afterAck, ev.recvAt.Sub(time.Unix(0, ack)))
			}
		}
	}
	timeout := time.After(15 * time.Second)
collect:
	for len(lat) < wr.LiveExpected {
		select {
		case ev := <-w.live:
			got(ev)
		case <-w.done:
			// Drain what arrived before the stream ended.
			for {
				select {
				case ev := <-w.live:
					got(ev)
					continue
				default:
				}
				break collect
			}
		case <-timeout:
			break collect
		}
	}
	wall := time.Since(start)
	cancel()
	<-w.done
	wr.LiveEvents = len(lat)
	slices.Sort(afterAck)
	wr.AfterAckP50Ms, wr.AfterAckP99Ms = ms(quantile(afterAck, 0.5)), ms(quantile(afterAck, 0.99))
	if len(lat) < wr.LiveExpected {
		fail(fmt.Errorf("watch: %d of %d stamped updates arrived within 15s: %s", len(lat), wr.LiveExpected, w.errText()))
	}
	rec.add(lat, nil, len(lat))
	b.finishWatch(rec, wall, snap, w)
}

func (b *bench) finishWatch(rec *recorder, wall time.Duration, snap cpuSnapshot, w *watcher) {
	wr := &b.rep.Watch
	w.mu.Lock()
	for k, v := range w.types {
		wr.EventTypes[k] = v
	}
	if w.err != nil && !errors.Is(w.err, context.Canceled) {
		wr.StreamError = w.err.Error()
		rec.add(nil, []error{fmt.Errorf("watch stream: %w", w.err)}, 0)
	}
	w.mu.Unlock()
	p := rec.phase("watch", wall)
	p.OpsPerSec = 0
	b.finish(p, snap)
	ok := p.Errors == 0 && p.Ops > 0 && time.Duration(p.P99Ms*1e6) <= watchBudget
	p.Budget, p.BudgetOK = fmt.Sprintf("p99 ≤ %s", watchBudget), &ok
	p.Note = fmt.Sprintf("latency PUT sent → event received; replay of %d events took %.0f ms", wr.ReplayEvents, wr.ReplayMs)
	fmt.Printf("  %-8s done: %d events, %d errors, p99 %.2f ms\n", "watch", p.Ops, p.Errors, p.P99Ms)
}

func (b *bench) phaseErrors(name string) int {
	for _, p := range b.rep.Phases {
		if p.Name == name {
			return p.Errors
		}
	}
	return 0
}

// liveEvent is the arrival of a stamped update: the shoot's name, when the PUT was sent and when the event arrived.
type liveEvent struct {
	name         string
	sent, recvAt time.Time
}

// watcher reads one watch stream: events up to caughtUpAt are the replay; events carrying a sent-at stamp are live
// and their latency goes to live.
type watcher struct {
	caughtUpAt  int64
	startCaught bool
	caughtUp    chan struct{}
	live        chan liveEvent
	done        chan struct{}

	mu       sync.Mutex
	replayed int
	types    map[string]int
	err      error
}

func (w *watcher) errText() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return "no stream error"
	}
	return w.err.Error()
}

func (w *watcher) run(ctx context.Context, c *client, path string) {
	defer close(w.done)
	w.types = map[string]int{}
	setErr := func(err error) {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		setErr(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		setErr(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		setErr(fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(body)))
		return
	}
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	caught := w.startCaught
	// The first event carrying a PUT's stamp is the PUT's own; with the loops on, their later writes of the same
	// shoot (labels and finalizers the PUT's body lacked) carry the stamp too and are not the PUT's delivery.
	stamps := map[string]string{}
	for events := 0; events < 10_000_000; events++ {
		line, err := r.ReadBytes('\n')
		recv := time.Now()
		if len(bytes.TrimSpace(line)) > 0 {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Message  string `json:"message"`
					Metadata struct {
						Name            string            `json:"name"`
						ResourceVersion string            `json:"resourceVersion"`
						Annotations     map[string]string `json:"annotations"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				setErr(fmt.Errorf("watch event: %w", jerr))
				return
			}
			w.mu.Lock()
			w.types[ev.Type]++
			w.mu.Unlock()
			if ev.Type == "ERROR" {
				setErr(fmt.Errorf("watch ERROR event: %s", ev.Object.Message))
				return
			}
			rv, _ := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
			if !caught {
				w.mu.Lock()
				w.replayed++
				w.mu.Unlock()
				if rv >= w.caughtUpAt {
					caught = true
					close(w.caughtUp)
				}
			} else if s := ev.Object.Metadata.Annotations[sentAtAnno]; s != "" && s != "0" && stamps[ev.Object.Metadata.Name] != s {
				stamps[ev.Object.Metadata.Name] = s
				sentAt, _ := strconv.ParseInt(s, 10, 64)
				select {
				case w.live <- liveEvent{name: ev.Object.Metadata.Name, sent: time.Unix(0, sentAt), recvAt: recv}:
				default:
				}
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				setErr(fmt.Errorf("watch stream ended: %w", err))
			} else {
				setErr(ctx.Err())
			}
			return
		}
	}
}

// resourceVersion finds metadata.resourceVersion in an object's JSON; metadata comes before spec in the hub's JSON.
func resourceVersion(body []byte) (int64, error) {
	key := []byte(`"resourceVersion":"`)
	i := bytes.Index(body, key)
	spec := bytes.Index(body, []byte(`"spec":`))
	if i < 0 || (spec >= 0 && spec < i) {
		var obj struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			return 0, fmt.Errorf("decode answer: %w", err)
		}
		return strconv.ParseInt(obj.Metadata.ResourceVersion, 10, 64)
	}
	rest := body[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return 0, errors.New("unterminated resourceVersion")
	}
	return strconv.ParseInt(string(rest[:end]), 10, 64)
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- output ----

func (b *bench) print() {
	rep := b.rep
	fmt.Println()
	fmt.Printf("REST benchmark of %s: %d shoots (%d..%d bytes of JSON, %d as returned), %d HTTP/2 clients, %d CPUs, %s\n",
		rep.Target, rep.N, rep.ShootBytes.Min, rep.ShootBytes.Max, rep.ShootBytes.Returned, rep.C, rep.CPUs, rep.GoVersion)
	if b.t.hub != nil {
		fmt.Printf("hub start → /readyz 200: %.1f ms (budget < %.0f ms: %s)\n", rep.StartupMs, rep.StartupBudgetMs, verdict(rep.StartupOK))
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tops\terrors\ttime s\tops/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tserver CPU s\tbench CPU s\tother CPU s\tserver RSS MiB\tbudget\t\t")
	for _, p := range rep.Phases {
		bud := ""
		if p.BudgetOK != nil {
			bud = p.Budget + " " + verdict(*p.BudgetOK)
		}
		ops := fmt.Sprintf("%.0f", p.OpsPerSec)
		if p.OpsPerSec < 10 {
			ops = fmt.Sprintf("%.1f", p.OpsPerSec)
		}
		if p.Name == "watch" {
			ops = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t\t\n",
			p.Name, p.Ops, p.Errors, p.Seconds, ops, p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs, p.HubCPUSec, p.BenchCPUSec, p.OtherCPUSec, float64(p.HubRSSBytes)/(1<<20), bud)
	}
	tw.Flush()
	fmt.Println()
	for _, s := range rep.ListSamples {
		sel := "whole collection"
		if s.Selector != "" {
			sel = s.Selector
		}
		enc := "identity"
		if s.Gzip {
			enc = "gzip accepted"
		}
		fmt.Printf("  list %-30s %8.2f ms  %6d items  %6.1f MB, %6.2f MB read (%s)\n", sel, s.Ms, s.Items, float64(s.Bytes)/1e6, float64(s.WireBytes)/1e6, enc)
	}
	w := rep.Watch
	fmt.Printf("\nwatch from resourceVersion %d: replayed %d events (want %d) in %.0f ms, then %d of %d stamped updates arrived; event types %v\n",
		w.FromResourceVersion, w.ReplayEvents, w.ReplayExpected, w.ReplayMs, w.LiveEvents, w.LiveExpected, w.EventTypes)
	fmt.Printf("watch event received − PUT answer received: p50 %.2f ms, p99 %.2f ms (the watch's own delay, without the write's)\n",
		w.AfterAckP50Ms, w.AfterAckP99Ms)
	if w.StreamError != "" {
		fmt.Printf("watch stream error: %s\n", w.StreamError)
	}
	fmt.Printf("server RSS at the end (all its processes): %.1f MiB (VmRSS), peak %.1f MiB (VmHWM)\n", float64(rep.HubRSSBytes)/(1<<20), float64(rep.HubPeakRSSBytes)/(1<<20))
	fmt.Printf("hub log: %d warning/error lines\n", rep.HubLogProblems.Count)
	for _, l := range rep.HubLogProblems.First {
		fmt.Printf("  %s\n", l)
	}
	for _, p := range rep.Phases {
		for _, e := range p.FirstErrors {
			fmt.Printf("%s error: %s\n", p.Name, e)
		}
	}
	fmt.Printf("total errors: %d, elapsed %s\n", rep.Errors, rep.Elapsed.Round(time.Millisecond))
}

// ---- objects ----

type (
	obj  = map[string]any
	list = []any
)

type prerequisite struct {
	path string
	obj  obj
}

// prerequisites are what a Shoot in garden-dev needs: its namespace, the Project owning it, the CloudProfile offering
// its region, Kubernetes version and machine types, and its CredentialsBinding (with the Secret it binds).
func prerequisites() []prerequisite {
	zones := list{obj{"name": "eu-central-1a"}, obj{"name": "eu-central-1b"}, obj{"name": "eu-central-1c"}}
	machineType := func(name, cpu, mem string) obj {
		return obj{"name": name, "cpu": cpu, "gpu": "0", "memory": mem, "usable": true, "architecture": "amd64"}
	}
	out := []prerequisite{
		{"/api/v1/namespaces", obj{"apiVersion": "v1", "kind": "Namespace", "metadata": obj{
			"name":        namespace,
			"labels":      obj{"gardener.cloud/role": "project", "project.gardener.cloud/name": "dev"},
			"annotations": obj{"namespace.gardener.cloud/keep-after-project-deletion": "true"},
		}}},
		{"/apis/core.gardener.cloud/v1beta1/projects", obj{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Project",
			"metadata": obj{"name": "dev"},
			"spec": obj{
				"namespace": namespace,
				"owner":     obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "john.doe@example.com"},
				"members": list{
					obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "john.doe@example.com", "role": "admin"},
					obj{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice.doe@example.com", "role": "viewer"},
				},
				// The shoots' toleration must be whitelisted, as Gardener's ShootTolerationRestriction asks.
				"tolerations": obj{"whitelist": list{obj{"key": "seed.gardener.cloud/protected"}}},
			}}},
		{"/apis/core.gardener.cloud/v1beta1/cloudprofiles", obj{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile",
			"metadata": obj{"name": "aws"},
			"spec": obj{
				"type":       "aws",
				"kubernetes": obj{"versions": list{obj{"version": "1.35.4"}, obj{"version": "1.34.7"}, obj{"version": "1.33.11"}}},
				"machineImages": list{obj{"name": "gardenlinux", "versions": list{
					obj{"version": "1877.5.0"}, obj{"version": "1592.9.0"},
				}}},
				"machineTypes": list{
					machineType("m5.large", "2", "8Gi"), machineType("m5.xlarge", "4", "16Gi"),
					machineType("m5.2xlarge", "8", "32Gi"), machineType("c5.2xlarge", "8", "16Gi"),
					machineType("r5.xlarge", "4", "32Gi"),
				},
				"volumeTypes": list{
					obj{"name": "gp3", "class": "standard", "usable": true},
					obj{"name": "io1", "class": "premium", "usable": true},
				},
				"regions": list{obj{"name": "eu-central-1", "zones": zones}},
			}}},
		{"/api/v1/namespaces/" + namespace + "/secrets", obj{"apiVersion": "v1", "kind": "Secret",
			"metadata":   obj{"name": "aws-account", "namespace": namespace},
			"type":       "Opaque",
			"stringData": obj{"accessKeyID": "AKIAIOSFODNN7EXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		}},
		{"/api/v1/namespaces/" + namespace + "/secrets", obj{"apiVersion": "v1", "kind": "Secret",
			"metadata":   obj{"name": "route53-credentials", "namespace": namespace},
			"type":       "Opaque",
			"stringData": obj{"accessKeyID": "AKIAIOSFODNN7EXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		}},
		credentialsBinding(),
		// The extension types the shoots name, registered as Gardener's ExtensionValidator wants them (one
		// registration without a deployment standing for the provider, networking, DNS, OS and shoot extensions).
		{"/apis/core.gardener.cloud/v1beta1/controllerregistrations", obj{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "ControllerRegistration",
			"metadata": obj{"name": "bench-extensions"},
			"spec": obj{"resources": list{
				obj{"kind": "ControlPlane", "type": "aws"}, obj{"kind": "Infrastructure", "type": "aws"}, obj{"kind": "Worker", "type": "aws"},
				obj{"kind": "Network", "type": "calico"}, obj{"kind": "DNSRecord", "type": "aws-route53"},
				obj{"kind": "OperatingSystemConfig", "type": "gardenlinux"}, obj{"kind": "Extension", "type": "shoot-dns-service"},
				obj{"kind": "Extension", "type": "shoot-cert-service"}, obj{"kind": "Extension", "type": "shoot-networking-filter"},
			}}}},
	}
	// The shoots' spec.resources name a ConfigMap per team; the shoot reference controller wants them to exist.
	for _, team := range teams {
		out = append(out, prerequisite{"/api/v1/namespaces/" + namespace + "/configmaps", obj{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": obj{"name": "audit-policy-" + team, "namespace": namespace},
			"data":     obj{"policy": "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"},
		}})
	}
	return out
}

// credentialsBinding is the shoots' CredentialsBinding.
func credentialsBinding() prerequisite {
	return prerequisite{"/apis/security.gardener.cloud/v1alpha1/namespaces/" + namespace + "/credentialsbindings", obj{
		"apiVersion": "security.gardener.cloud/v1alpha1", "kind": "CredentialsBinding",
		"metadata":       obj{"name": "aws-account", "namespace": namespace},
		"provider":       obj{"type": "aws"},
		"credentialsRef": obj{"apiVersion": "v1", "kind": "Secret", "name": "aws-account", "namespace": namespace},
	}}
}

var (
	teams = []string{"platform", "payments", "search", "checkout", "identity", "data", "ml", "observability"}
	envs  = []string{"dev", "staging", "prod"}
)

// shoot builds shoot i the way a defaulted Gardener AWS shoot looks after admission: cloud profile reference, three
// worker pools with labels, annotations, taints and provider config, control plane settings, networking, DNS,
// extensions, maintenance, and many labels and annotations. The generation label and the sent-at annotation are the
// markers updates replace.
func shoot(i int) obj {
	name := shootName(i)
	zones := []string{"eu-central-1a", "eu-central-1b", "eu-central-1c"}
	team := teams[i%len(teams)]
	kubelet := obj{
		"failSwapOn":                       true,
		"serializeImagePulls":              false,
		"maxPods":                          110,
		"podPidsLimit":                     4096,
		"imageGCHighThresholdPercent":      85,
		"imageGCLowThresholdPercent":       80,
		"containerLogMaxSize":              "100Mi",
		"containerLogMaxFiles":             5,
		"evictionHard":                     obj{"memoryAvailable": "100Mi", "imageFSAvailable": "5%", "imageFSInodesFree": "5%", "nodeFSAvailable": "5%", "nodeFSInodesFree": "5%"},
		"evictionMaxPodGracePeriod":        90,
		"evictionPressureTransitionPeriod": "4m0s",
		"kubeReserved":                     obj{"cpu": "80m", "memory": "1Gi", "pid": "20k"},
		"systemReserved":                   obj{"cpu": "20m", "memory": "256Mi"},
		"streamingConnectionIdleTimeout":   "5m",
		"seccompDefault":                   true,
	}
	worker := func(pool, machine string, minimum, maximum int, taints list, extraLabels obj) obj {
		labels := obj{
			"worker.gardener.cloud/pool": pool,
			"node.kubernetes.io/role":    "node",
			"team":                       team,
		}
		for k, v := range extraLabels {
			labels[k] = v
		}
		return obj{
			"name":           pool,
			"machine":        obj{"type": machine, "image": obj{"name": "gardenlinux", "version": "1877.5.0"}, "architecture": "amd64"},
			"minimum":        minimum,
			"maximum":        maximum,
			"maxSurge":       1,
			"maxUnavailable": 0,
			"volume":         obj{"type": "gp3", "size": "50Gi", "encrypted": true},
			"zones":          zones,
			"cri":            obj{"name": "containerd"},
			"labels":         labels,
			"annotations": obj{
				"cluster-autoscaler.kubernetes.io/scale-down-disabled": "false",
			},
			"taints": taints,
			"providerConfig": obj{
				"apiVersion":              "aws.provider.extensions.gardener.cloud/v1alpha1",
				"kind":                    "WorkerConfig",
				"volume":                  obj{"iops": 3000, "throughput": 125},
				"instanceMetadataOptions": obj{"httpTokens": "required", "httpPutResponseHopLimit": 2},
			},
			"machineControllerManager": obj{
				"machineDrainTimeout":    "2h",
				"machineHealthTimeout":   "10m",
				"machineCreationTimeout": "20m",
				"maxEvictRetries":        30,
			},
			"updateStrategy": "AutoRollingUpdate",
		}
	}
	return obj{
		"apiVersion": "core.gardener.cloud/v1beta1",
		"kind":       "Shoot",
		"metadata": obj{
			"name":      name,
			"namespace": namespace,
			"labels": obj{
				groupLabel:                      fmt.Sprintf("g%d", i%groups),
				genLabel:                        "0",
				statusLabel:                     "healthy",
				"shoot.gardener.cloud/provider": "aws",
				"networking.shoot.gardener.cloud/provider":                     "calico",
				"extensions.extensions.gardener.cloud/shoot-dns-service":       "true",
				"extensions.extensions.gardener.cloud/shoot-cert-service":      "true",
				"extensions.extensions.gardener.cloud/shoot-networking-filter": "true",
				"app.kubernetes.io/managed-by":                                 "trellis-bench",
				"team":                                                         team,
				"environment":                                                  envs[i%len(envs)],
				"cost-center":                                                  fmt.Sprintf("cc-%04d", i%37),
				"owner":                                                        fmt.Sprintf("user-%03d", i%211),
				"compliance.example.com/level":                                 "high",
				"billing.example.com/account":                                  fmt.Sprintf("acct-%06d", i%997),
			},
			"annotations": obj{
				"confirmation.gardener.cloud/deletion":                                     "true",
				"gardener.cloud/created-by":                                                fmt.Sprintf("user-%03d@example.com", i%211),
				"shoot.gardener.cloud/infrastructure-cleanup-wait-period-seconds":          "180",
				"shoot.gardener.cloud/cloud-config-execution-max-delay-seconds":            "300",
				"dashboard.gardener.cloud/no-hibernation-schedule":                         "true",
				"shoot.gardener.cloud/cleanup-extended-apis-finalize-grace-period-seconds": "30",
				"support.gardener.cloud/eol-notifications":                                 "true",
				"custom.example.com/ticket":                                                fmt.Sprintf("OPS-%05d", 10000+i),
				"custom.example.com/description": "Shoot cluster of team " + team + " for " + envs[i%len(envs)] +
					" workloads; created by the Trellis REST benchmark with three worker pools across three zones.",
				sentAtAnno: "0",
			},
		},
		"spec": obj{
			"cloudProfileName":       "aws",
			"cloudProfile":           obj{"kind": "CloudProfile", "name": "aws"},
			"credentialsBindingName": "aws-account",
			"region":                 "eu-central-1",
			"purpose":                "production",
			"schedulerName":          "default-scheduler",
			"addons": obj{
				"kubernetesDashboard": obj{"enabled": false, "authenticationMode": "token"},
				"nginxIngress":        obj{"enabled": false, "externalTrafficPolicy": "Cluster"},
			},
			"controlPlane": obj{"highAvailability": obj{"failureTolerance": obj{"type": "zone"}}},
			"dns": obj{
				"domain": name + ".dev.shoot.example.gardener.cloud",
				"providers": list{obj{
					"type": "aws-route53", "primary": true, "secretName": "route53-credentials",
					"domains": obj{"include": list{name + ".dev.shoot.example.gardener.cloud"}},
				}},
			},
			"extensions": list{
				obj{"type": "shoot-dns-service", "providerConfig": obj{
					"apiVersion": "service.dns.extensions.gardener.cloud/v1alpha1", "kind": "DNSConfig",
					"syncProvidersFromShootSpecDNS": true,
				}},
				obj{"type": "shoot-cert-service", "providerConfig": obj{
					"apiVersion": "service.cert.extensions.gardener.cloud/v1alpha1", "kind": "CertConfig",
					"shootIssuers": obj{"enabled": true},
				}},
				obj{"type": "shoot-networking-filter", "disabled": false},
			},
			"hibernation": obj{"enabled": false, "schedules": list{
				obj{"start": "00 20 * * 1,2,3,4,5", "end": "00 07 * * 1,2,3,4,5", "location": "Europe/Berlin"},
			}},
			"kubernetes": obj{
				"version": "1.35.4",
				"kubeAPIServer": obj{
					"enableAnonymousAuthentication":       false,
					"eventTTL":                            "1h0m0s",
					"requests":                            obj{"maxNonMutatingInflight": 400, "maxMutatingInflight": 200},
					"logging":                             obj{"verbosity": 2, "httpAccessVerbosity": 3},
					"defaultNotReadyTolerationSeconds":    300,
					"defaultUnreachableTolerationSeconds": 300,
					"admissionPlugins": list{
						obj{"name": "PodNodeSelector"},
						obj{"name": "AlwaysPullImages", "disabled": true},
					},
					"featureGates":  obj{"StructuredAuthenticationConfiguration": true},
					"runtimeConfig": obj{"autoscaling/v2beta2": false},
					"serviceAccountConfig": obj{
						"extendTokenExpiration": true,
						"maxTokenExpiration":    "2160h",
					},
					"autoscaling": obj{"minAllowed": obj{"cpu": "250m", "memory": "512Mi"}},
				},
				"kubeControllerManager": obj{
					"nodeCIDRMaskSize":        24,
					"nodeMonitorGracePeriod":  "40s",
					"horizontalPodAutoscaler": obj{"syncPeriod": "15s", "tolerance": 0.1, "downscaleStabilization": "5m0s", "initialReadinessDelay": "30s", "cpuInitializationPeriod": "5m0s"},
				},
				"kubeScheduler": obj{"profile": "balanced"},
				"kubeProxy":     obj{"mode": "IPTables", "enabled": true},
				"kubelet":       kubelet,
				"verticalPodAutoscaler": obj{
					"enabled": true, "evictAfterOOMThreshold": "10m0s", "evictionRateBurst": 1, "evictionRateLimit": -1,
					"evictionTolerance": 0.5, "recommendationMarginFraction": 0.15, "updaterInterval": "1m0s", "recommenderInterval": "1m0s",
				},
				"clusterAutoscaler": obj{
					"expander": "least-waste", "maxNodeProvisionTime": "20m0s", "scaleDownDelayAfterAdd": "1h0m0s",
					"scaleDownUnneededTime":         "30m0s",
					"scaleDownUtilizationThreshold": 0.5, "scanInterval": "10s", "maxGracefulTerminationSeconds": 600,
				},
			},
			"maintenance": obj{
				"autoUpdate":               obj{"kubernetesVersion": true, "machineImageVersion": true},
				"timeWindow":               obj{"begin": fmt.Sprintf("%02d0000+0000", i%24), "end": fmt.Sprintf("%02d0000+0000", (i+1)%24)},
				"confineSpecUpdateRollout": false,
				"autoRotation": obj{"credentials": obj{
					"observability": obj{"enabled": true, "rotationPeriod": "168h0m0s"},
					"sshKeypair":    obj{"enabled": true, "rotationPeriod": "168h0m0s"},
				}},
			},
			"monitoring": obj{"alerting": obj{"emailReceivers": list{team + "-oncall@example.com"}}},
			"networking": obj{
				"type":       "calico",
				"pods":       "100.64.0.0/12",
				"nodes":      "10.180.0.0/16",
				"services":   "100.104.0.0/13",
				"ipFamilies": list{"IPv4"},
				"providerConfig": obj{
					"apiVersion": "calico.networking.extensions.gardener.cloud/v1alpha1", "kind": "NetworkConfig",
					"backend": "bird", "ipam": obj{"type": "host-local", "cidr": "usePodCIDR"},
					"typha": obj{"enabled": true}, "overlay": obj{"enabled": false, "createPodRoutes": true},
					"snatToUpstreamDNS": obj{"enabled": true},
				},
			},
			"provider": obj{
				"type": "aws",
				"controlPlaneConfig": obj{
					"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig",
					"cloudControllerManager": obj{"featureGates": obj{"RotateKubeletServerCertificate": true}, "useCustomRouteController": true},
					"loadBalancerController": obj{"enabled": true, "ingressClassName": "alb"},
					"storage":                obj{"managedDefaultClass": true},
				},
				"infrastructureConfig": obj{
					"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "InfrastructureConfig",
					"enableECRAccess": true,
					"dualStack":       obj{"enabled": false},
					"networks": obj{
						"vpc": obj{"cidr": "10.180.0.0/16"},
						"zones": list{
							obj{"name": zones[0], "workers": "10.180.0.0/19", "public": "10.180.96.0/22", "internal": "10.180.112.0/22"},
							obj{"name": zones[1], "workers": "10.180.32.0/19", "public": "10.180.100.0/22", "internal": "10.180.116.0/22"},
							obj{"name": zones[2], "workers": "10.180.64.0/19", "public": "10.180.104.0/22", "internal": "10.180.120.0/22"},
						},
					},
				},
				"workers": list{
					worker("worker-a", "m5.xlarge", 3, 10, list{}, nil),
					worker("worker-b", "m5.2xlarge", 1, 6, list{
						obj{"key": "dedicated", "value": team, "effect": "NoSchedule"},
					}, obj{"workload-class": "batch"}),
					worker("memory", "r5.xlarge", 0, 4, list{
						obj{"key": "dedicated", "value": "memory-intensive", "effect": "NoSchedule"},
						obj{"key": "example.com/spot", "value": "true", "effect": "PreferNoSchedule"},
					}, obj{"workload-class": "memory"}),
				},
				"workersSettings": obj{"sshAccess": obj{"enabled": true}},
			},
			"systemComponents": obj{
				"coreDNS":      obj{"autoscaling": obj{"mode": "horizontal"}},
				"nodeLocalDNS": obj{"enabled": true, "forceTCPToClusterDNS": true, "forceTCPToUpstreamDNS": true, "disableForwardToUpstreamDNS": false},
			},
			"tolerations": list{obj{"key": "seed.gardener.cloud/protected"}},
			"resources":   list{obj{"name": "audit-policy", "resourceRef": obj{"apiVersion": "v1", "kind": "ConfigMap", "name": "audit-policy-" + team}}},
		},
	}
}
