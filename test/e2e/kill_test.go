package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// startHubAt runs the hub on dataDir and addr (empty: a free loopback port) with extra flags, logging to logPath,
// and waits until it is ready; the test stops it (SIGTERM, SIGKILL after 10 s) at its end.
func startHubAt(t *testing.T, bin, dataDir, logPath, addr string, args ...string) *binproc.Hub {
	t.Helper()
	h, err := binproc.StartHub(context.Background(), binproc.HubConfig{Bin: bin, DataDir: dataDir, LogPath: logPath, Addr: addr, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	t.Logf("hub pid %d on %s ready after %s", h.PID(), h.Addr(), h.Startup.Round(time.Millisecond))
	return h
}

// startHub runs the hub on dataDir and a free loopback port, without the gRPC-only listener.
func startHub(t *testing.T, bin, dataDir, logPath string) *binproc.Hub {
	t.Helper()
	return startHubAt(t, bin, dataDir, logPath, "", "--grpc-listen", "")
}

const (
	killNamespace = "kill-test"
	totalObjects  = 1000
	writers       = 8
	killAfterAcks = 400
)

// outcome of one create.
type outcome int

const (
	notTried outcome = iota
	acked            // 201 received
	inDoubt          // no answer, or an answer other than 201: the write may or may not have happened
)

// written is one object the test tried to create: what was sent and what the hub answered.
type written struct {
	kind    string // "configmaps" or "secrets"
	name    string
	data    map[string]string // as in the JSON: plain for ConfigMaps, base64 for Secrets
	plain   string            // a value of the object that is unique to it, for the encryption-at-rest check
	outcome outcome
	uid, rv string // from the 201 answer
	err     string // why it is in doubt
}

func (w *written) path() string {
	return "/api/v1/namespaces/" + killNamespace + "/" + w.kind + "/" + w.name
}

// newObject makes object k: even k a ConfigMap, odd k a Secret, each with data unique to it.
func newObject(k int) *written {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	marker := fmt.Sprintf("kill-test-value-%04d-%s", k, hex.EncodeToString(nonce))
	payload := strings.Repeat(marker+";", 8)
	w := &written{plain: marker}
	plain := map[string]string{"index": fmt.Sprint(k), "marker": marker, "payload": payload}
	if k%2 == 0 {
		w.kind, w.name, w.data = "configmaps", fmt.Sprintf("cm-%04d", k), plain
		return w
	}
	w.kind, w.name, w.data = "secrets", fmt.Sprintf("secret-%04d", k), map[string]string{}
	for key, v := range plain {
		w.data[key] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return w
}

func (w *written) body() []byte {
	obj := map[string]any{
		"apiVersion": "v1",
		"metadata":   map[string]any{"name": w.name, "namespace": killNamespace, "labels": map[string]string{"test": "kill"}},
		"data":       w.data,
	}
	if w.kind == "configmaps" {
		obj["kind"] = "ConfigMap"
	} else {
		obj["kind"], obj["type"] = "Secret", "Opaque"
	}
	b, _ := json.Marshal(obj)
	return b
}

// stored is what the hub returns for a ConfigMap or Secret.
type stored struct {
	Metadata struct {
		Name            string `json:"name"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

// TestSIGKILLLosesNoAcknowledgedWrite SIGKILLs the hub while 8 writers create ConfigMaps and Secrets, restarts it on
// the same data dir, and checks that every create answered with 201 survived with the data sent, that every create
// left in doubt is either absent or complete, and that the Secrets' values are not on disk in plain text.
func TestSIGKILLLosesNoAcknowledgedWrite(t *testing.T) {
	lightTest(t)
	bin := hubBinary(t)
	dataDir, logPath := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "hub.log")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	h := startHub(t, bin, dataDir, logPath)
	ns := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + killNamespace + `"}}`)
	if code, body, err := h.Do(ctx, http.MethodPost, "/api/v1/namespaces", ns); err != nil || code != http.StatusCreated {
		t.Fatalf("create namespace: %d %s %v", code, body, err)
	}

	objs := make([]*written, totalObjects)
	for k := range objs {
		objs[k] = newObject(k)
	}

	// Phase 1: write until ~400 creates are acknowledged, then SIGKILL the hub with the other writers mid-request.
	var (
		next, ackCount, inflight atomic.Int64
		killed                   atomic.Bool
		killOnce                 sync.Once
		inflightAtKill           int64
	)
	kill := func() {
		killOnce.Do(func() {
			inflightAtKill = inflight.Load()
			killed.Store(true)
			if err := h.Kill(); err != nil {
				t.Errorf("SIGKILL hub: %v", err)
			}
		})
	}
	create := func(h *binproc.Hub, w *written) {
		inflight.Add(1)
		code, body, err := h.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+killNamespace+"/"+w.kind, w.body())
		inflight.Add(-1)
		if err == nil && code == http.StatusCreated {
			var s stored
			if jerr := json.Unmarshal(body, &s); jerr != nil {
				t.Errorf("%s: 201 with an undecodable body: %v", w.name, jerr)
			}
			w.uid, w.rv, w.outcome = s.Metadata.UID, s.Metadata.ResourceVersion, acked
			return
		}
		w.outcome = inDoubt
		if err != nil {
			w.err = err.Error()
		} else {
			w.err = fmt.Sprintf("%d %s", code, bytes.TrimSpace(body))
		}
	}
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !killed.Load() && ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= totalObjects {
					return
				}
				w := objs[k]
				create(h, w)
				if w.outcome == acked && ackCount.Add(1) == killAfterAcks {
					kill()
				}
			}
		}()
	}
	wg.Wait()
	if !killed.Load() {
		t.Fatalf("only %d creates were acknowledged before the writers ran out of objects; the hub was never killed", ackCount.Load())
	}
	if h.Running() {
		t.Fatal("the hub still runs after SIGKILL")
	}
	phase1Acked, phase1Tried := 0, 0
	for _, w := range objs {
		if w.outcome != notTried {
			phase1Tried++
		}
		if w.outcome == acked {
			phase1Acked++
		}
	}
	t.Logf("before the kill: %d creates tried, %d acknowledged, %d in doubt; %d requests in flight at SIGKILL",
		phase1Tried, phase1Acked, phase1Tried-phase1Acked, inflightAtKill)
	if inflightAtKill == 0 {
		t.Errorf("no create was in flight at SIGKILL: the test did not exercise an interrupted write")
	}

	// Phase 2: restart on the same data dir and create the objects not tried yet.
	h = startHub(t, bin, dataDir, logPath)
	var rest []*written
	for _, w := range objs {
		if w.outcome == notTried {
			rest = append(rest, w)
		}
	}
	var idx atomic.Int64
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(idx.Add(1) - 1)
				if i >= len(rest) {
					return
				}
				create(h, rest[i])
				if rest[i].outcome != acked {
					t.Errorf("create %s after the restart: %s", rest[i].name, rest[i].err)
				}
			}
		}()
	}
	wg.Wait()

	// Every object the hub has must be one the test sent, exactly as sent.
	listed := map[string]stored{}
	for _, kind := range []string{"configmaps", "secrets"} {
		code, body, err := h.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+killNamespace+"/"+kind, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("list %s: %d %s %v", kind, code, body, err)
		}
		var list struct{ Items []stored }
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		for _, it := range list.Items {
			listed[kind+"/"+it.Metadata.Name] = it
		}
	}
	byKey := map[string]*written{}
	for _, w := range objs {
		byKey[w.kind+"/"+w.name] = w
	}
	for key, it := range listed {
		w, ok := byKey[key]
		if !ok {
			t.Errorf("list has %s, which the test never created", key)
			continue
		}
		if !maps.Equal(w.data, it.Data) {
			t.Errorf("list: %s has data %v, sent %v (outcome %v)", key, it.Data, w.data, w.outcome)
		}
	}

	var present, absent int
	for _, w := range objs {
		key := w.kind + "/" + w.name
		code, body, err := h.Do(ctx, http.MethodGet, w.path(), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", w.path(), err)
		}
		_, inList := listed[key]
		switch w.outcome {
		case acked:
			if code != http.StatusOK {
				t.Errorf("acknowledged %s lost: GET %d %s", key, code, body)
				continue
			}
			var s stored
			if err := json.Unmarshal(body, &s); err != nil {
				t.Errorf("GET %s: %v", key, err)
				continue
			}
			if !maps.Equal(w.data, s.Data) {
				t.Errorf("acknowledged %s has data %v, sent %v", key, s.Data, w.data)
			}
			if s.Metadata.UID != w.uid || s.Metadata.ResourceVersion != w.rv {
				t.Errorf("acknowledged %s: uid %s rv %s, the 201 said uid %s rv %s", key, s.Metadata.UID, s.Metadata.ResourceVersion, w.uid, w.rv)
			}
			if !inList {
				t.Errorf("acknowledged %s is missing from the list", key)
			}
		case inDoubt:
			switch code {
			case http.StatusNotFound:
				absent++
				if inList {
					t.Errorf("in-doubt %s: GET 404 but listed", key)
				}
			case http.StatusOK:
				present++
				var s stored
				if err := json.Unmarshal(body, &s); err != nil || !maps.Equal(w.data, s.Data) {
					t.Errorf("in-doubt %s is present but not as sent: %s (%v)", key, body, err)
				}
				if !inList {
					t.Errorf("in-doubt %s: GET 200 but not listed", key)
				}
			default:
				t.Errorf("in-doubt %s: GET %d %s", key, code, body)
			}
		default:
			t.Errorf("%s was never tried", key)
		}
	}
	acks := 0
	for _, w := range objs {
		if w.outcome == acked {
			acks++
		}
	}
	t.Logf("after the restart: %d of %d objects acknowledged and intact; of %d in doubt, %d present and complete, %d absent",
		acks, totalObjects, present+absent, present, absent)

	// Secrets are encrypted at rest: their values must not be in etcd's files, while ConfigMaps' are (which shows
	// that the search would find them).
	if err := h.Stop(10 * time.Second); err != nil {
		t.Error(err)
	}
	cmFound, secretFound := searchAtRest(t, filepath.Join(dataDir, "etcd"), objs)
	if cmFound == 0 {
		t.Errorf("no ConfigMap value found in etcd's files: the encryption-at-rest check cannot be trusted")
	}
	if secretFound > 0 {
		t.Errorf("%d Secret values found in plain text in etcd's files", secretFound)
	}
	if t.Failed() {
		t.Logf("hub log:\n%s", binproc.TailLines(logPath, 40))
	}
}

// searchAtRest counts the acknowledged objects whose unique value appears in the files under dir, by kind. Each
// file is read once and scanned for the values' common prefix.
func searchAtRest(t *testing.T, dir string, objs []*written) (configMaps, secrets int) {
	t.Helper()
	found := make([]bool, len(objs))
	prefix := []byte("kill-test-value-")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i := bytes.Index(data, prefix); i >= 0; {
			rest := data[i+len(prefix):]
			var k int
			if _, err := fmt.Sscanf(string(rest[:min(4, len(rest))]), "%04d", &k); err == nil && k >= 0 && k < len(objs) &&
				bytes.HasPrefix(data[i:], []byte(objs[k].plain)) {
				found[k] = true
			}
			j := bytes.Index(rest, prefix)
			if j < 0 {
				break
			}
			i += len(prefix) + j
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read etcd files: %v", err)
	}
	for k, w := range objs {
		if !found[k] || w.outcome != acked {
			continue
		}
		if w.kind == "secrets" {
			secrets++
		} else {
			configMaps++
		}
	}
	return configMaps, secrets
}

// registerLocalExtensions registers provider-local's extension types (and the Network and OperatingSystemConfig types
// the tests' shoots name) on a hub process, which then admits seeds and shoots of those types (Gardener's
// ExtensionValidator).
func registerLocalExtensions(t *testing.T, h *binproc.Hub) {
	t.Helper()
	body := hubtest.Registration(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	code, out, err := h.Do(context.Background(), "POST", "/apis/core.gardener.cloud/v1beta1/controllerregistrations", body)
	if err != nil || code != 201 {
		t.Fatalf("register provider-local's extension types: %d %s %v", code, out, err)
	}
}
