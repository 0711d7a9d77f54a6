package store_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// benchShoot is a shoot of about 7 KB, the size of the REST budget's shoots.
func benchShoot(namespace, name string, i int) *corev1beta1.Shoot {
	s := storetest.NewShoot(namespace, name, fmt.Sprintf("seed-%d", i%10), map[string]string{
		"env":  []string{"prod", "dev", "staging", "test", "qa", "perf", "demo", "lab", "ci", "sandbox"}[i%10],
		"team": fmt.Sprintf("team-%d", i%7),
	})
	s.Metadata.Annotations = map[string]string{"note": strings.Repeat("x", 7000)}
	return s
}

func benchStore(b *testing.B) (*store.Store, *store.Collection) {
	b.Helper()
	s, err := store.Open(b.Context(), store.Config{DataDir: b.TempDir(), Logger: storetest.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	c, err := s.Register(b.Context(), storetest.Shoots())
	if err != nil {
		b.Fatal(err)
	}
	return s, c
}

// fill creates n shoots with 16 concurrent writers.
func fill(b *testing.B, c *store.Collection, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := c.Create(b.Context(), benchShoot(fmt.Sprintf("garden-p%d", i%50), fmt.Sprintf("shoot-%05d", i), i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkCreate(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		_, c := benchStore(b)
		i := 0
		for b.Loop() {
			if _, err := c.Create(b.Context(), benchShoot("garden-a", fmt.Sprintf("s%d", i), i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel16", func(b *testing.B) {
		_, c := benchStore(b)
		var n atomic.Int64
		b.SetParallelism(8) // 16 goroutines on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(n.Add(1))
				if _, err := c.Create(b.Context(), benchShoot("garden-a", fmt.Sprintf("s%d", i), i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkGet(b *testing.B) {
	_, c := benchStore(b)
	fill(b, c, 1000)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, err := c.Get(b.Context(), fmt.Sprintf("garden-p%d", i%50), fmt.Sprintf("shoot-%05d", i%1000)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkList10k(b *testing.B) {
	_, c := benchStore(b)
	fill(b, c, 10000)
	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	for _, bc := range []struct {
		name string
		o    store.ListOptions
		want int
	}{
		{"all", store.ListOptions{}, 10000},
		{"labelSelector", store.ListOptions{Labels: prod}, 1000},
		{"setSelector", store.ListOptions{Labels: mustSelector(b, "env in (prod,dev),team!=team-1")}, 0},
		{"limit500", store.ListOptions{Limit: 500}, 500},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := c.List(b.Context(), "", bc.o)
				if err != nil {
					b.Fatal(err)
				}
				if bc.want > 0 && len(res.Items) != bc.want {
					b.Fatalf("%d items, want %d", len(res.Items), bc.want)
				}
			}
		})
	}
}

func mustSelector(b *testing.B, s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		b.Fatal(err)
	}
	return sel
}

// BenchmarkWatchLatency measures an update's round trip: write to etcd, event through the cache to a watcher.
func BenchmarkWatchLatency(b *testing.B) {
	_, c := benchStore(b)
	fill(b, c, 100)
	w, err := c.Watch(b.Context(), "", store.WatchOptions{ResourceVersion: strconv.FormatInt(0, 10)})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for range 100 {
		<-w.Events()
	}
	i := 0
	for b.Loop() {
		_, err := c.GuaranteedUpdate(b.Context(), "garden-p0", "shoot-00000", false, func(cur store.Object) (store.Object, error) {
			cur.(*corev1beta1.Shoot).Spec.Region = strconv.Itoa(i)
			return cur, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if ev := <-w.Events(); ev.Type != store.Modified {
			b.Fatalf("event %s", ev.Type)
		}
		i++
	}
}

// BenchmarkCachedEncodings reads the memoized encoding and a derived value of every object of a list of 2,000, as the
// REST gateway does for a gzipped list (its JSON, then its deflate segment).
func BenchmarkCachedEncodings(b *testing.B) {
	_, c := benchStore(b)
	fill(b, c, 2000)
	res, err := c.List(b.Context(), "", store.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	encode := func(o store.Object) ([]byte, error) { return []byte(o.GetMetadata().GetName()), nil }
	derive := func(data []byte, memo any) (any, bool) {
		if memo != nil {
			return memo, false
		}
		return len(data), true
	}
	for b.Loop() {
		for _, o := range res.Items {
			if _, err := c.CachedEncoding(o, encode); err != nil {
				b.Fatal(err)
			}
			if _, err := c.CachedDerivedEncoding(o, encode, derive); err != nil {
				b.Fatal(err)
			}
		}
	}
}
