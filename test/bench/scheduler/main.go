package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"github.com/trellis-dev/trellis/hub/admission"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/scheduler"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/bench/benchcmd"
)

const (
	namespace   = "garden-bench"
	taintKey    = "dedicated"
	taintValue  = "bench"
	creators    = 16
	profileName = "aws"
)

var allRegions = []string{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1", "ap-northeast-1", "sa-east-1", "ca-central-1"}

type config struct {
	n, seeds, regions, capacity int
	workers                     int
	strategy                    string
	online                      int
	rate                        float64
	out                         string
	timeout                     time.Duration
}

func (c *config) validate() error {
	var errs []error
	if c.n < 1 || c.n > 200000 {
		errs = append(errs, errors.New("-n must be between 1 and 200000"))
	}
	if c.regions < 1 || c.regions > len(allRegions) {
		errs = append(errs, fmt.Errorf("-regions must be between 1 and %d", len(allRegions)))
	}
	if c.seeds < c.regions || c.seeds > 10000 {
		errs = append(errs, errors.New("-seeds must be between -regions and 10000"))
	}
	if c.capacity < 1 {
		errs = append(errs, errors.New("-capacity must be positive"))
	}
	if c.workers < 1 || c.workers > 256 {
		errs = append(errs, errors.New("-workers must be between 1 and 256"))
	}
	if c.online < 0 || c.rate <= 0 || c.rate > 10000 {
		errs = append(errs, errors.New("-online must not be negative and -rate must be in (0, 10000]"))
	}
	if c.timeout <= 0 {
		errs = append(errs, errors.New("-timeout must be positive"))
	}
	return errors.Join(errs...)
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 10000, "pending shoots of the backlog")
	flag.IntVar(&cfg.seeds, "seeds", 100, "seeds")
	flag.IntVar(&cfg.regions, "regions", 5, "regions the seeds and shoots are spread over")
	flag.IntVar(&cfg.capacity, "capacity", 250, "allocatable shoots per seed (gardenlet's chart default)")
	flag.IntVar(&cfg.workers, "workers", 5, "scheduler workers (concurrentSyncs; Gardener's default 5)")
	flag.StringVar(&cfg.strategy, "strategy", scheduler.StrategySameRegion, "candidate determination strategy")
	flag.IntVar(&cfg.online, "online", 1000, "shoots created one by one while the scheduler runs")
	flag.Float64Var(&cfg.rate, "rate", 200, "creates per second of the online phase")
	flag.StringVar(&cfg.out, "out", "bin/bench/scheduler.json", "write the results as JSON to this file (empty: none)")
	flag.DurationVar(&cfg.timeout, "timeout", 20*time.Minute, "time limit of the whole run")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	benchcmd.Main("bench-scheduler", cfg.timeout, cfg.out, func(ctx context.Context) (benchcmd.Report, bool, error) {
		rep, err := run(ctx, cfg)
		if rep == nil {
			return nil, false, err
		}
		return rep, rep.Failed, err
	})
}

// report is the JSON of a run.
type report struct {
	N, Seeds, Regions, Capacity, Workers int
	Strategy                             string
	GoVersion                            string
	CPUs                                 int
	Started                              string
	SeedsCreateSec, ShootsCreateSec      float64
	Backlog                              phase
	Online                               *phase `json:",omitempty"`
	Distribution                         distribution
	// SchedulingSuccessfulEvents counts the events written (asynchronously, as client-go does) by the end.
	SchedulingSuccessfulEvents int
	Problems                   []string `json:",omitempty"`
	Failed                     bool
}

// phase is one measured phase: how many shoots were bound, how long it took, and the per-shoot latencies.
type phase struct {
	Shoots, Bound       int
	Seconds             float64
	PerSecond           float64
	P50Ms, P99Ms, MaxMs float64
	CPUPercentOfOneCore float64
	LatencyFrom         string
}

// distribution is where the shoots went.
type distribution struct {
	PerSeed                   map[string]int
	Min, Max                  int
	Mean, StdDev              float64
	PerRegionMinMax           map[string][2]int
	TaintedSeedsShoots        int
	UntoleratingOnTainted     int
	OverCapacitySeeds         []string `json:",omitempty"`
	UnevenRegions             []string `json:",omitempty"`
	ShootsWithoutSeedAtTheEnd int
}

func run(ctx context.Context, cfg config) (*report, error) {
	dir, err := os.MkdirTemp("", "trellis-bench-scheduler-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, store.Config{DataDir: dir, EncryptionKeys: []store.Key{{Name: "bench", Secret: key}}})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer func() { _ = st.Close() }()
	regCtx, stopReg := context.WithCancel(ctx)
	defer stopReg()
	reg, err := api.NewRegistry(regCtx, api.Config{Store: st, Services: grpc.NewServer(), Admission: admission.Builtin()})
	if err != nil {
		return nil, err
	}
	coll := func(group, resource string) *store.Collection {
		c, _ := reg.Collection(schema.GroupResource{Group: group, Resource: resource})
		return c
	}
	shoots, seeds, profiles := coll("core.gardener.cloud", "shoots"), coll("core.gardener.cloud", "seeds"), coll("core.gardener.cloud", "cloudprofiles")
	rep := &report{N: cfg.n, Seeds: cfg.seeds, Regions: cfg.regions, Capacity: cfg.capacity, Workers: cfg.workers, Strategy: cfg.strategy,
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Started: time.Now().UTC().Format(time.RFC3339)}
	regions := allRegions[:cfg.regions]

	// Setup.
	t0 := time.Now()
	if _, err := profiles.Create(ctx, &corev1beta1.CloudProfile{Metadata: &metav1.ObjectMeta{Name: profileName}, Spec: &corev1beta1.CloudProfileSpec{Type: "aws"}}); err != nil {
		return nil, err
	}
	seedRegion := map[string]string{}
	tainted := map[string]bool{}
	for i := range cfg.seeds {
		r := regions[i%len(regions)]
		name := fmt.Sprintf("seed-%s-%03d", r, i)
		seedRegion[name] = r
		s := &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: name}, Spec: &corev1beta1.SeedSpec{
			Provider: &corev1beta1.SeedProvider{Type: "aws", Region: r, Zones: []string{r + "a", r + "b", r + "c"}},
			Networks: &corev1beta1.SeedNetworks{Nodes: proto.String("10.0.0.0/16"), Pods: "10.1.0.0/16", Services: "10.2.0.0/16"},
		}}
		if (i/len(regions))%10 == 9 { // two per region of twenty
			s.Spec.Taints = []*corev1beta1.SeedTaint{{Key: taintKey, Value: proto.String(taintValue)}}
			tainted[name] = true
		}
		if _, err := seeds.Create(ctx, s); err != nil {
			return nil, err
		}
		if _, err := seeds.GuaranteedUpdate(ctx, "", name, true, func(cur store.Object) (store.Object, error) {
			cur.(*corev1beta1.Seed).Status = &corev1beta1.SeedStatus{
				Conditions:  []*metav1.Condition{{Type: scheduler.ConditionGardenletReady, Status: "True"}},
				Capacity:    map[string]string{scheduler.ResourceShoots: fmt.Sprint(cfg.capacity)},
				Allocatable: map[string]string{scheduler.ResourceShoots: fmt.Sprint(cfg.capacity)},
			}
			return cur, nil
		}); err != nil {
			return nil, err
		}
	}
	rep.SeedsCreateSec = time.Since(t0).Seconds()
	t0 = time.Now()
	if err := createShoots(ctx, shoots, 0, cfg.n, regions, creators, nil); err != nil {
		return nil, err
	}
	rep.ShootsCreateSec = time.Since(t0).Seconds()
	fmt.Printf("setup: %d seeds in %.1f s, %d pending shoots in %.1f s\n", cfg.seeds, rep.SeedsCreateSec, cfg.n, rep.ShootsCreateSec)

	// Watch the binds from here on.
	list, err := shoots.List(ctx, namespace, store.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	binds := newBindWatch()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go binds.follow(watchCtx, shoots, list.ResourceVersion)

	// Backlog.
	sched, err := scheduler.New(scheduler.Config{Source: reg, Workers: cfg.workers, Strategy: cfg.strategy,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	schedCtx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	cpu0 := cpuTime()
	start := time.Now()
	go func() {
		defer close(schedDone)
		_ = sched.Run(schedCtx)
	}()
	defer func() {
		stopSched()
		<-schedDone
	}()
	names := shootNames(0, cfg.n)
	lat, bound := binds.wait(ctx, names, func(string) time.Time { return start })
	rep.Backlog = summarize(len(names), lat, bound, time.Since(start), cpuTime()-cpu0, "scheduler start")
	rep.Backlog.Seconds = binds.last(names).Sub(start).Seconds()
	if rep.Backlog.Seconds > 0 {
		rep.Backlog.PerSecond = float64(bound) / rep.Backlog.Seconds
	}
	fmt.Printf("backlog: %d of %d bound in %.2f s: %.0f shoots/s\n", bound, len(names), rep.Backlog.Seconds, rep.Backlog.PerSecond)

	// Online.
	if cfg.online > 0 {
		created := &sync.Map{}
		cpu0 = cpuTime()
		t0 = time.Now()
		if err := createShoots(ctx, shoots, cfg.n, cfg.online, regions, 1, &pacer{rate: cfg.rate, created: created}); err != nil {
			return nil, err
		}
		names := shootNames(cfg.n, cfg.online)
		lat, bound := binds.wait(ctx, names, func(n string) time.Time { v, _ := created.Load(n); return v.(time.Time) })
		p := summarize(len(names), lat, bound, time.Since(t0), cpuTime()-cpu0, "create returned")
		rep.Online = &p
		fmt.Printf("online: %d of %d bound at %.0f creates/s\n", bound, len(names), cfg.rate)
	}

	// Distribution, and the events (written off the workers' path) once they are all there.
	rep.Distribution, rep.Problems = distributionOf(ctx, shoots, seedRegion, tainted, cfg)
	rep.SchedulingSuccessfulEvents = countEvents(ctx, coll("", "events"), cfg.n+cfg.online)
	if rep.Backlog.Bound != rep.Backlog.Shoots || (rep.Online != nil && rep.Online.Bound != rep.Online.Shoots) {
		rep.Problems = append(rep.Problems, "not every shoot was bound")
	}
	rep.Failed = len(rep.Problems) > 0
	return rep, nil
}

// countEvents waits up to 10 s until want SchedulingSuccessful events exist and returns how many there are.
func countEvents(ctx context.Context, c *store.Collection, want int) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := c.List(ctx, namespace, store.ListOptions{})
		if err != nil {
			return 0
		}
		n := 0
		for _, o := range res.Items {
			if o.(*kcorev1.Event).GetReason() == scheduler.EventSchedulingSuccessful {
				n++
			}
		}
		if n >= want || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func shootNames(from, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("shoot-%06d", from+i)
	}
	return out
}

// shoot i: region round-robin; in each region every tenth with a zonal control plane, every twentieth tolerating
// the taint.
func shoot(i int, regions []string) *corev1beta1.Shoot {
	j := i / len(regions)
	s := &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("shoot-%06d", i)},
		Spec: &corev1beta1.ShootSpec{
			CloudProfile: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: profileName},
			Region:       regions[i%len(regions)],
			Purpose:      proto.String("development"),
			Provider:     &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "pool", Minimum: proto.Int32(1), Maximum: proto.Int32(3)}}},
			Networking:   &corev1beta1.Networking{Type: proto.String("calico"), Nodes: proto.String("10.250.0.0/16"), Pods: proto.String("100.96.0.0/11"), Services: proto.String("100.64.0.0/13")},
			Kubernetes:   &corev1beta1.Kubernetes{Version: "1.33.2"},
		},
	}
	if j%10 == 3 {
		s.Spec.ControlPlane = &corev1beta1.ControlPlane{HighAvailability: &corev1beta1.HighAvailability{FailureTolerance: &corev1beta1.FailureTolerance{Type: "zone"}}}
	}
	if j%20 == 7 {
		s.Spec.Tolerations = []*metav1.Toleration{{Key: taintKey, Value: proto.String(taintValue)}}
	}
	return s
}

// pacer spaces creates at rate per second and records when each create returned.
type pacer struct {
	rate    float64
	created *sync.Map
}

func createShoots(ctx context.Context, c *store.Collection, from, n int, regions []string, workers int, p *pacer) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if p != nil {
					if d := time.Until(start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				s := shoot(from+i, regions)
				if _, err := c.Create(ctx, s); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("create %s: %w", s.Metadata.Name, err) })
					return
				}
				if p != nil {
					p.created.Store(s.Metadata.Name, time.Now())
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// bindWatch records when a watch of the shoots first saw each shoot with spec.seedName.
type bindWatch struct {
	mu      sync.Mutex
	boundAt map[string]time.Time
	changed chan struct{}
}

func newBindWatch() *bindWatch {
	return &bindWatch{boundAt: map[string]time.Time{}, changed: make(chan struct{})}
}

func (b *bindWatch) follow(ctx context.Context, c *store.Collection, rv string) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, namespace, store.WatchOptions{ResourceVersion: rv, Bookmarks: true})
		if err != nil {
			// Fallen out of the history: what was bound meanwhile is read from a list (its time is when we noticed).
			res, lerr := c.List(ctx, namespace, store.ListOptions{})
			if lerr != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			now := time.Now()
			for _, o := range res.Items {
				b.saw(o, now)
			}
			rv = res.ResourceVersion
			continue
		}
		for ev := range w.Events() {
			if ev.Type == store.Error {
				continue
			}
			rv = ev.Object.GetMetadata().GetResourceVersion()
			if ev.Type == store.Added || ev.Type == store.Modified {
				b.saw(ev.Object, time.Now())
			}
		}
		w.Stop()
	}
}

func (b *bindWatch) saw(o store.Object, at time.Time) {
	if o.(*corev1beta1.Shoot).GetSpec().GetSeedName() == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.boundAt[o.GetMetadata().GetName()]; ok {
		return
	}
	b.boundAt[o.GetMetadata().GetName()] = at
	close(b.changed)
	b.changed = make(chan struct{})
}

// wait waits until every named shoot was seen bound (or ctx ends) and returns the latencies from since(name).
func (b *bindWatch) wait(ctx context.Context, names []string, since func(string) time.Time) ([]time.Duration, int) {
	for {
		b.mu.Lock()
		n := 0
		for _, name := range names {
			if _, ok := b.boundAt[name]; ok {
				n++
			}
		}
		ch := b.changed
		b.mu.Unlock()
		if n == len(names) {
			break
		}
		select {
		case <-ctx.Done():
		case <-ch:
			continue
		case <-time.After(time.Second):
			continue
		}
		break
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var lat []time.Duration
	for _, name := range names {
		if at, ok := b.boundAt[name]; ok {
			lat = append(lat, at.Sub(since(name)))
		}
	}
	return lat, len(lat)
}

func (b *bindWatch) last(names []string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var last time.Time
	for _, n := range names {
		if at := b.boundAt[n]; at.After(last) {
			last = at
		}
	}
	return last
}

func summarize(n int, lat []time.Duration, bound int, wall, cpu time.Duration, from string) phase {
	p := phase{Shoots: n, Bound: bound, Seconds: wall.Seconds(), LatencyFrom: from}
	if wall > 0 {
		p.PerSecond = float64(bound) / wall.Seconds()
		p.CPUPercentOfOneCore = 100 * cpu.Seconds() / wall.Seconds()
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(f float64) float64 { return ms(lat[min(len(lat)-1, int(math.Ceil(f*float64(len(lat))))-1)]) }
		p.P50Ms, p.P99Ms, p.MaxMs = q(0.50), q(0.99), ms(lat[len(lat)-1])
	}
	return p
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func distributionOf(ctx context.Context, c *store.Collection, seedRegion map[string]string, tainted map[string]bool, cfg config) (distribution, []string) {
	d := distribution{PerSeed: map[string]int{}, PerRegionMinMax: map[string][2]int{}}
	var problems []string
	res, err := c.List(ctx, namespace, store.ListOptions{})
	if err != nil {
		return d, []string{err.Error()}
	}
	for name := range seedRegion {
		d.PerSeed[name] = 0
	}
	for _, o := range res.Items {
		s := o.(*corev1beta1.Shoot)
		seed := s.GetSpec().GetSeedName()
		if seed == "" {
			d.ShootsWithoutSeedAtTheEnd++
			continue
		}
		d.PerSeed[seed]++
		if tainted[seed] {
			d.TaintedSeedsShoots++
			if len(s.GetSpec().GetTolerations()) == 0 {
				d.UntoleratingOnTainted++
			}
		}
		if seedRegion[seed] != s.GetSpec().GetRegion() && cfg.strategy == scheduler.StrategySameRegion {
			problems = append(problems, fmt.Sprintf("%s (region %s) on seed %s", s.GetMetadata().GetName(), s.GetSpec().GetRegion(), seed))
		}
	}
	var sum, sq float64
	d.Min = math.MaxInt
	for name, n := range d.PerSeed {
		d.Min, d.Max = min(d.Min, n), max(d.Max, n)
		sum += float64(n)
		if n > cfg.capacity {
			d.OverCapacitySeeds = append(d.OverCapacitySeeds, name)
		}
	}
	d.Mean = sum / float64(len(d.PerSeed))
	for _, n := range d.PerSeed {
		sq += (float64(n) - d.Mean) * (float64(n) - d.Mean)
	}
	d.StdDev = math.Sqrt(sq / float64(len(d.PerSeed)))
	// Least loaded first: the untainted seeds of a region differ by at most one shoot (the tainted ones only get
	// the tolerating shoots, and shoots tolerating the taint may go to either kind).
	for name, n := range d.PerSeed {
		if tainted[name] {
			continue
		}
		r := seedRegion[name]
		mm, ok := d.PerRegionMinMax[r]
		if !ok {
			mm = [2]int{n, n}
		}
		d.PerRegionMinMax[r] = [2]int{min(mm[0], n), max(mm[1], n)}
	}
	for r, mm := range d.PerRegionMinMax {
		if mm[1]-mm[0] > 1 {
			d.UnevenRegions = append(d.UnevenRegions, fmt.Sprintf("%s: %d..%d", r, mm[0], mm[1]))
		}
	}
	slices.Sort(d.UnevenRegions)
	slices.Sort(d.OverCapacitySeeds)
	if len(d.OverCapacitySeeds) > 0 {
		problems = append(problems, "seeds over capacity: "+strings.Join(d.OverCapacitySeeds, ", "))
	}
	if d.UntoleratingOnTainted > 0 {
		problems = append(problems, fmt.Sprintf("%d shoots without toleration on tainted seeds", d.UntoleratingOnTainted))
	}
	if len(d.UnevenRegions) > 0 && cfg.strategy == scheduler.StrategySameRegion {
		problems = append(problems, "uneven regions: "+strings.Join(d.UnevenRegions, "; "))
	}
	return d, problems
}

// Print prints the report.
func (r *report) Print() { printReport(r) }

func printReport(rep *report) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nscheduler: %d seeds in %d regions (capacity %d), %d workers, strategy %s, %d CPUs, %s\n", rep.Seeds, rep.Regions, rep.Capacity, rep.Workers, rep.Strategy, rep.CPUs, rep.GoVersion)
	fmt.Fprintln(w, "phase\tshoots\tbound\ttime\tshoots/s\tp50\tp99\tmax\tlatency from\tCPU (% of a core)")
	row := func(name string, p phase) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.2f s\t%.0f\t%.1f ms\t%.1f ms\t%.1f ms\t%s\t%.0f %%\n", name, p.Shoots, p.Bound, p.Seconds, p.PerSecond, p.P50Ms, p.P99Ms, p.MaxMs, p.LatencyFrom, p.CPUPercentOfOneCore)
	}
	row("backlog", rep.Backlog)
	if rep.Online != nil {
		row("online", *rep.Online)
	}
	_ = w.Flush()
	d := rep.Distribution
	fmt.Printf("distribution: shoots per seed min %d, max %d, mean %.1f, stddev %.1f; on tainted seeds %d (all tolerating: %t)\n",
		d.Min, d.Max, d.Mean, d.StdDev, d.TaintedSeedsShoots, d.UntoleratingOnTainted == 0)
	var rs []string
	for _, r := range slices.Sorted(maps.Keys(d.PerRegionMinMax)) {
		rs = append(rs, fmt.Sprintf("%s %d..%d", r, d.PerRegionMinMax[r][0], d.PerRegionMinMax[r][1]))
	}
	fmt.Printf("per region (untainted seeds): %s\n", strings.Join(rs, ", "))
	fmt.Printf("SchedulingSuccessful events written: %d\n", rep.SchedulingSuccessfulEvents)
	for _, p := range rep.Problems {
		fmt.Println("PROBLEM:", p)
	}
}
