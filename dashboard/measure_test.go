package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/dashboard"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestDashboardThousandShoots opens a project of 1,000 shoots: they are all counted, only a screenful is in the
// DOM, the last one is a scroll away, a status change of one arrives live, and sorting works. It logs the
// measurements the issue asks for (time to first render, bytes shipped, watch event to page); it asserts none of
// them, as timings depend on the machine.
func TestDashboardThousandShoots(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-maintenance", "controllerregistration-seed"))
	br := startBrowser(t, h)
	landscape(t, h)
	mustDo(t, h, "POST", "/apis/core.gardener.cloud/v1beta1/projects", map[string]any{
		"metadata": map[string]any{"name": "load"}, "spec": map[string]any{"namespace": "garden-load"},
	}, 201)
	h.WaitNamespace(t, "garden-load")
	const n = 1000
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("s%04d", i)
				if code, out := h.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-load/shoots", shootObject(name, "1.33.4", "evaluation", false)); code != 201 {
					t.Errorf("create %s: %d %s", name, code, out)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("created %d shoots in %v", n, time.Since(start).Round(time.Millisecond))

	p := br.newPage(t)
	p.login(h.Token)
	p.goTo("/projects/load") // a full page load: scripts, session, projects, the list of 1,000, the first render
	p.waitJS("the mark", `performance.getEntriesByName("trellis:shoots-rendered").length > 0`)
	firstRender := eval[float64](p, `performance.getEntriesByName("trellis:shoots-rendered")[0].startTime`)
	p.waitJS("all counted", fmt.Sprintf(`document.querySelector("[data-testid=shoot-count]").innerText === "%d of %d shoots"`, n, n))
	inDOM := eval[int](p, `document.querySelectorAll("tr.shoot").length`)
	// The list's bytes on the wire (gzip) and decoded, from the browser's resource timing.
	listBytes := eval[[]float64](p, `(() => { const e = performance.getEntriesByType("resource").find(e => e.name.endsWith("/namespaces/garden-load/shoots"));
		return e ? [e.transferSize, e.decodedBodySize] : [0, 0]; })()`)
	if inDOM == 0 || inDOM > 100 {
		t.Errorf("%d rows in the DOM for %d shoots; want a screenful", inDOM, n)
	}
	p.shot("shoots-1000")
	eval[bool](p, `(document.querySelector(".scroller").scrollTop = 1e9, true)`)
	p.waitJS("the last shoot after scrolling", `!!document.querySelector("tr[data-shoot=s0999]")`)
	eval[bool](p, `(document.querySelector(".scroller").scrollTop = 0, true)`)
	p.waitJS("the first shoot again", `!!document.querySelector("tr[data-shoot=s0000]")`)

	// A watch event among 1,000 shoots.
	eval[bool](p, `(() => { window.__seen = 0; const tb = document.querySelector("table[data-testid=shoots] tbody");
		new MutationObserver(() => { if (!window.__seen && document.querySelector("tr[data-shoot=s0000] .operation")?.dataset.state === "Succeeded") window.__seen = Date.now(); })
			.observe(tb, {subtree: true, attributes: true, childList: true, characterData: true}); return true; })()`)
	mustDo(t, h, "PATCH", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-load/shoots/s0000/status",
		map[string]any{"status": map[string]any{"lastOperation": map[string]any{"type": "Create", "state": "Succeeded", "progress": 100}}}, 200, "Content-Type", mergePtch)
	written := time.Now()
	p.waitJS("s0000 Succeeded", `window.__seen > 0`)
	watchDelay := eval[int64](p, "window.__seen") - written.UnixMilli()

	// Sorting 1,000 rows: the click to the re-rendered table.
	sortMs := eval[float64](p, `new Promise(res => { const t0 = performance.now();
		document.querySelector("button[data-sort=name]").click();
		requestAnimationFrame(() => setTimeout(() => res(performance.now() - t0), 0)); })`)
	if first := eval[string](p, `document.querySelector("tr.shoot").dataset.shoot`); first != "s0999" {
		t.Errorf("first row sorted by name descending: %q", first)
	}

	gz, raw := shipped(t, h)
	all, err := dashboard.AssetStats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured: the whole embedded page: %d files, %d bytes gzip (%d raw)", all.Files, all.GzipBytes, all.Bytes)
	t.Logf("measured: first render of %d shoots %.0f ms after navigation start; %d rows in the DOM; watch event to page %d ms; sort %.0f ms; shipped %d bytes gzip (%d raw); the list of %d shoots %.0f bytes on the wire (%.0f decoded)",
		n, firstRender, inDOM, watchDelay, sortMs, gz, raw, n, listBytes[0], listBytes[1])
}

// shipped fetches the page and the assets it loads as a browser does (gzip) and sums their bytes on the wire and
// uncompressed.
func shipped(t *testing.T, h *hubtest.Hub) (gzipped, raw int) {
	get := func(path string) []byte {
		req, _ := http.NewRequest("GET", h.URL+path, nil)
		req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then leaves the body compressed
		resp, err := h.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		gzipped += len(b)
		if n := resp.Header.Get("Content-Encoding"); n == "gzip" {
			code, plain := h.Do(t, "GET", path, nil) // the transport decompresses this one
			if code != 200 {
				t.Fatalf("GET %s: %d", path, code)
			}
			raw += len(plain)
			return plain
		}
		raw += len(b)
		return b
	}
	index := get("/dashboard/")
	for _, m := range regexp.MustCompile(`(?:src|href)="(/dashboard/[^"]+)"`).FindAllStringSubmatch(string(index), -1) {
		get(m[1])
	}
	return gzipped, raw
}
