package table

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/timescale"
)

const shootListHead = `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"ShootList","metadata":{"resourceVersion":"7"}}`

// exampleShoots are n fresh copies of Gardener's example shoots, each its own allocation.
func exampleShoots(t *testing.T, n int) [][]byte {
	t.Helper()
	shoots := exampleObjects(t)["core.gardener.cloud/v1beta1/Shoot"]
	if len(shoots) == 0 {
		t.Fatal("no example shoot")
	}
	items := make([][]byte, n)
	for i := range items {
		items[i] = bytes.Replace(shoots[i%len(shoots)], []byte(`"name":"`), fmt.Appendf(nil, `"name":"m%04d-`, i), 1)
	}
	return items
}

func column(t *testing.T, tb *kmetav1.Table, name string) int {
	t.Helper()
	for i, c := range tb.ColumnDefinitions {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no column %s in %v", name, tb.ColumnDefinitions)
	return -1
}

// TestMemoServesItemsAgainAndAges: a second Table of the same items reads them from the memo, not their JSON —
// bytes changed in place, which a list's items never are (gateway.ListWriter), show through only without the memo —
// and the AGE column is rendered at each Table's time, not the first one's.
func TestMemoServesItemsAgainAndAges(t *testing.T) {
	items := exampleShoots(t, 3)
	memo := NewMemo()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	first, err := OfList([]byte(shootListHead), items, "v1", kmetav1.IncludeMetadata, t0, memo)
	if err != nil {
		t.Fatal(err)
	}
	if memo.size() != len(items) {
		t.Fatalf("the memo holds %d items, want %d", memo.size(), len(items))
	}
	region, age := column(t, first, "REGION"), column(t, first, "Age")
	i := bytes.Index(items[0], []byte(`"region":"`))
	if i < 0 {
		t.Fatal("the example shoot has no region")
	}
	items[0][i+len(`"region":"`)] = 'X'
	later := t0.Add(72 * time.Hour)
	again, err := OfList([]byte(shootListHead), items, "v1", kmetav1.IncludeMetadata, later, memo)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := OfList([]byte(shootListHead), items, "v1", kmetav1.IncludeMetadata, later, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.Rows[0].Cells[region], first.Rows[0].Cells[region]; got != want {
		t.Errorf("REGION from the memo %v, want the first Table's %v: the item was read again", got, want)
	}
	if got := fresh.Rows[0].Cells[region].(string); got == first.Rows[0].Cells[region] || got[0] != 'X' {
		t.Errorf("REGION without the memo %q: the changed bytes were not read", got)
	}
	if a, b := first.Rows[0].Cells[age], again.Rows[0].Cells[age]; a == b || b != fresh.Rows[0].Cells[age] {
		t.Errorf("AGE %v at the first Table, %v 72 hours later from the memo, %v without it", a, b, fresh.Rows[0].Cells[age])
	}
	if !bytes.Equal(again.Rows[1].Object.Raw, fresh.Rows[1].Object.Raw) {
		t.Errorf("the PartialObjectMetadata from the memo differs:\n%s\n%s", again.Rows[1].Object.Raw, fresh.Rows[1].Object.Raw)
	}
	// An item that is not an object fails as without the memo, and is not kept.
	if _, err := OfList([]byte(shootListHead), [][]byte{[]byte(`[1]`)}, "v1", kmetav1.IncludeMetadata, later, memo); err == nil {
		t.Error("an item that is not an object: no error")
	}
	if _, err := OfList([]byte(shootListHead), [][]byte{{}}, "v1", kmetav1.IncludeMetadata, later, memo); err == nil {
		t.Error("an empty item: no error")
	}
	if memo.size() != len(items) {
		t.Errorf("the memo holds %d items after two bad ones, want %d", memo.size(), len(items))
	}
}

// TestMemoForgetsFreedItems: the memo holds no item's JSON alive, and lets go of an item's entry once the garbage
// collector freed the JSON.
func TestMemoForgetsFreedItems(t *testing.T) {
	memo := NewMemo()
	func() {
		items := exampleShoots(t, 50)
		if _, err := OfList([]byte(shootListHead), items, "v1", kmetav1.IncludeMetadata, time.Now(), memo); err != nil {
			t.Fatal(err)
		}
		if memo.size() != len(items) {
			t.Fatalf("the memo holds %d items, want %d", memo.size(), len(items))
		}
	}()
	// Cleanups run on their own goroutine after a collection found the JSON unreachable.
	deadline := time.Now().Add(timescale.Scale(30 * time.Second))
	for memo.size() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := memo.size(); n > 0 {
		t.Fatalf("the memo still holds %d of 50 freed items", n)
	}
}
