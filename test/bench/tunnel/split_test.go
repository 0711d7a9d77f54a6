package tunnel_test

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// endpointsEnv makes the test binary the endpoints process of TestTunnelSplitBench (TestMain runs endpointsMain).
const endpointsEnv = "TRELLIS_BENCH_ENDPOINTS"

// TestTunnelSplitBench measures the 100 MB streams with the stream's two ends, the client and the stand-in target, in
// a process of their own, and the relays (the hub and the agent) in this one: first with both processes on all CPUs
// (as TestTunnelBench, the four parties sharing the cores), then with the ends pinned to one CPU and the relays to
// another, as deployed, where a hub and a seed's agent run on hosts of their own and take no CPU from the client or
// the shoot's kube-apiserver. Pairs of streams alternate, tunnel then direct, in each arrangement; the report gives
// the ratios' quartiles, the ratio of the summed times, and the CPU each process spent per MiB. Each arrangement
// starts with a pair that is not counted.
func TestTunnelSplitBench(t *testing.T) {
	if os.Getenv("TRELLIS_BENCH") == "" {
		t.Skip("a benchmark: make bench-tunnel")
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs, has %v", cpus)
	}
	ep := startEndpoints(t)
	h, _, sni := startBenchTo(t, ep.target)
	report := map[string]any{"cpus": cpus}
	report["loadavgBefore"] = loadavg()
	arrangement := func(name string, pinned bool) {
		if pinned {
			ep.do(t, fmt.Sprintf("pin %d", cpus[0]))
			restore := pinSelf(t, cpus[1], all)
			defer restore()
		}
		// One pair first, not counted: the first streams after a move to other CPUs run cold.
		ep.stream(t, h.TunnelAddr(), sni)
		ep.stream(t, "", "")
		var ratios []float64
		var tunnelSeconds, directSeconds float64
		var tunnelRates, directRates, endsTunnel, endsDirect, relays []string
		for range streamCount() {
			cpu0 := cpuTime()
			tm, tc := ep.stream(t, h.TunnelAddr(), sni)
			relayMs := float64((cpuTime() - cpu0).Microseconds()) / 1000 / (streamBytes >> 20)
			dm, dc := ep.stream(t, "", "")
			ratios = append(ratios, tm/dm)
			tunnelSeconds, directSeconds = tunnelSeconds+1/tm, directSeconds+1/dm
			tunnelRates, directRates = append(tunnelRates, fmt.Sprint(int(tm))), append(directRates, fmt.Sprint(int(dm)))
			endsTunnel, endsDirect = append(endsTunnel, fmt.Sprintf("%.2f", tc)), append(endsDirect, fmt.Sprintf("%.2f", dc))
			relays = append(relays, fmt.Sprintf("%.2f", relayMs))
		}
		r := ratioSummary(ratios, tunnelSeconds, directSeconds)
		r["tunnelMiBps"], r["directMiBps"] = tunnelRates, directRates
		r["endsCPUMsPerMiBTunnel"], r["endsCPUMsPerMiBDirect"], r["relaysCPUMsPerMiB"] = endsTunnel, endsDirect, relays
		report[name] = r
		if pinned {
			ep.do(t, "unpin")
		}
	}
	// TRELLIS_BENCH_ARRANGEMENTS (comma-separated: shared, split) runs some arrangements only.
	parts := os.Getenv("TRELLIS_BENCH_ARRANGEMENTS")
	if parts == "" || slices.Contains(strings.Split(parts, ","), "shared") {
		arrangement("sharedCPUs", false)
	}
	if parts == "" || slices.Contains(strings.Split(parts, ","), "split") {
		arrangement("endsAndRelaysOnCPUsOfTheirOwn", true)
	}
	writeReport(t, "tunnel-split", report)
}

// endpoints is the process holding the stream's ends (endpointsMain): the stand-in target and the client.
type endpoints struct {
	target string // the target's address
	in     io.Writer
	out    *bufio.Reader
}

// startEndpoints starts this test binary as the endpoints process; it ends with the test.
func startEndpoints(t *testing.T) *endpoints {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), endpointsEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() }) // it exits when its input ends
	ep := &endpoints{in: in, out: bufio.NewReader(out)}
	ep.target = ep.read(t)
	return ep
}

// do sends the endpoints process one command and returns its answer.
func (e *endpoints) do(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(e.in, cmd); err != nil {
		t.Fatal(err)
	}
	return e.read(t)
}

func (e *endpoints) read(t *testing.T) string {
	t.Helper()
	line, err := e.out.ReadString('\n')
	if err != nil {
		t.Fatalf("endpoints process: %v", err)
	}
	line = strings.TrimSpace(line)
	if msg, failed := strings.CutPrefix(line, "error "); failed {
		t.Fatalf("endpoints process: %s", msg)
	}
	return line
}

// stream has the endpoints process read a 100 MB stream from the target, through the SNI listener at listener with
// the shoot's name sni, or directly when listener is "": the rate in MiB/s and the process's CPU time per MiB (ms).
func (e *endpoints) stream(t *testing.T, listener, sni string) (mibps, cpuMsPerMiB float64) {
	t.Helper()
	if listener == "" {
		listener, sni = "-", "-"
	}
	f := strings.Fields(e.do(t, "stream "+listener+" "+sni))
	if len(f) != 2 {
		t.Fatalf("endpoints process answered %q", f)
	}
	mibps, _ = strconv.ParseFloat(f[0], 64)
	cpuMsPerMiB, _ = strconv.ParseFloat(f[1], 64)
	return mibps, cpuMsPerMiB
}

// endpointsMain is the endpoints process: it starts the target, writes its address, then runs the commands read
// from standard input, one a line, answering each with a line ("error ..." when it failed): "stream LISTENER SNI"
// ("- -": directly), "pin CPU", "unpin". It ends when its input does.
func endpointsMain() int {
	addr, targetTLS, stop, err := startTarget()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer stop()
	fmt.Println(addr)
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		fmt.Println("error", err)
		return 1
	}
	procs := runtime.GOMAXPROCS(0)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		var err error
		switch {
		case len(f) == 3 && f[0] == "stream":
			var mibps, cpuMs float64
			if mibps, cpuMs, err = endpointStream(addr, targetTLS, f[1], f[2]); err == nil {
				fmt.Printf("%.1f %.3f\n", mibps, cpuMs)
				continue
			}
		case len(f) == 2 && f[0] == "pin":
			var cpu int
			if cpu, err = strconv.Atoi(f[1]); err == nil {
				var set unix.CPUSet
				set.Set(cpu)
				if err = setThreadsAffinity(&set); err == nil {
					runtime.GOMAXPROCS(1)
				}
			}
		case len(f) == 1 && f[0] == "unpin":
			if err = setThreadsAffinity(&all); err == nil {
				runtime.GOMAXPROCS(procs)
			}
		default:
			err = fmt.Errorf("unknown command %q", in.Text())
		}
		if err != nil {
			fmt.Println("error", err)
			continue
		}
		fmt.Println("ok")
	}
	return 0
}

// endpointStream reads one stream from the target at addr (through listener with sni unless listener is "-").
func endpointStream(addr string, targetTLS *tls.Config, listener, sni string) (mibps, cpuMsPerMiB float64, err error) {
	cfg := targetTLS.Clone()
	if listener != "-" {
		addr = listener
		throughListener(cfg, sni)
	}
	cpu0 := cpuTime()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	mibps, mib, err := readStream(c)
	if err != nil {
		return 0, 0, err
	}
	return mibps, float64((cpuTime() - cpu0).Microseconds()) / 1000 / mib, nil
}

// pinSelf moves every thread of this process to cpu, with one P, until restore moves them back to all.
func pinSelf(t *testing.T, cpu int, all unix.CPUSet) (restore func()) {
	t.Helper()
	var set unix.CPUSet
	set.Set(cpu)
	if err := setThreadsAffinity(&set); err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(1)
	return func() {
		runtime.GOMAXPROCS(procs)
		if err := setThreadsAffinity(&all); err != nil {
			t.Error(err)
		}
	}
}

// setThreadsAffinity sets the CPU affinity of every thread of this process. A thread started meanwhile takes its
// creator's, so the threads are walked until a pass finds none it had not set.
func setThreadsAffinity(set *unix.CPUSet) error {
	done := map[int]bool{}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}

// writeReport logs report and writes it to bin/bench/NAME.json.
func writeReport(t *testing.T, name string, report map[string]any) {
	report["loadavgAfter"] = loadavg()
	out, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("%s:\n%s", name, out)
	_ = os.MkdirAll("../../../bin/bench", 0o755)
	_ = os.WriteFile(filepath.Join("../../../bin/bench", name+".json"), out, 0o644)
}
