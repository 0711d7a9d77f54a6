package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// result is the measurement of one command.
type result struct {
	Command  []string      `json:"command"`
	Runs     int           `json:"runs"`
	Min      time.Duration `json:"minNanos"`
	Median   time.Duration `json:"medianNanos"`
	P90      time.Duration `json:"p90Nanos"`
	Max      time.Duration `json:"maxNanos"`
	Budget   time.Duration `json:"budgetNanos,omitempty"`
	WithinIt bool          `json:"withinBudget,omitempty"`
}

func main() {
	runs := flag.Int("n", 200, "runs of each command")
	trellisctl := flag.String("trellisctl", "bin/trellisctl", "trellisctl binary")
	kubectl := flag.String("kubectl", "", "kubectl binary of the peer measurement (none: no peer)")
	out := flag.String("out", "bin/bench/cli.json", "where to write the results")
	budget := flag.Duration("budget", 50*time.Millisecond, "start-up budget of trellisctl (DESIGN: first byte of `trellisctl version` under 50 ms)")
	flag.Parse()

	results := []result{measure(*runs, *trellisctl, "version")}
	results[0].Budget, results[0].WithinIt = *budget, results[0].Median <= *budget
	if *kubectl != "" {
		results = append(results, measure(*runs, *kubectl, "version", "--client"))
	}
	fmt.Printf("%-40s %6s %10s %10s %10s %10s\n", "command (first byte of output)", "runs", "min", "median", "p90", "max")
	for _, r := range results {
		fmt.Printf("%-40s %6d %10v %10v %10v %10v\n", filepath.Base(r.Command[0])+" "+r.Command[1], r.Runs,
			r.Min.Round(10*time.Microsecond), r.Median.Round(10*time.Microsecond), r.P90.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond))
	}
	if len(results) == 2 {
		fmt.Printf("median ratio kubectl/trellisctl: %.2f\n", float64(results[1].Median)/float64(results[0].Median))
	}
	fmt.Printf("trellisctl median %v, budget %v: within=%v\n", results[0].Median.Round(10*time.Microsecond), *budget, results[0].WithinIt)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		log.Fatal(err)
	}
	b, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}

// measure runs bin with args n times (after one warm-up run, which brings the binary into the page cache) and
// returns the times from start to its first byte of standard output.
func measure(n int, bin string, args ...string) result {
	times := make([]time.Duration, 0, n)
	for i := 0; i <= n; i++ {
		d, err := firstByte(bin, args...)
		if err != nil {
			log.Fatalf("%s %v: %v", bin, args, err)
		}
		if i > 0 {
			times = append(times, d)
		}
	}
	slices.Sort(times)
	return result{
		Command: append([]string{bin}, args...), Runs: n,
		Min: times[0], Median: times[len(times)/2], P90: times[len(times)*9/10], Max: times[len(times)-1],
	}
}

func firstByte(bin string, args ...string) (time.Duration, error) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var b [1]byte
	if _, err := io.ReadFull(out, b[:]); err != nil {
		return 0, fmt.Errorf("no output: %w", err)
	}
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, out)
	return d, cmd.Wait()
}
