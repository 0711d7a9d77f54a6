package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clientrest "k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestKubectlProtobuf: kubectl's typed create commands send Kubernetes' kinds in protobuf, and a client-go
// clientset with the protobuf content type creates, updates, reads and watches them; Gardener's kinds in protobuf
// stay 415.
func TestKubectlProtobuf(t *testing.T) {
	lightTest(t)
	kubectl := kubectlBinary(t)
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"-project"}, true })
	kc := kubectlAs(t, kubectl, h, h.Token)
	ok := func(args ...string) string {
		t.Helper()
		out, code := kc(args...)
		if code != 0 {
			t.Fatalf("kubectl %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	ok("create", "namespace", "garden-dev")
	ok("create", "configmap", "c", "--from-literal=a=b")
	ok("create", "secret", "generic", "s", "--from-literal=k=v")
	ok("create", "serviceaccount", "robot")
	for _, p := range []string{"/api/v1/namespaces/garden-dev", "/api/v1/namespaces/garden-dev/configmaps/c", "/api/v1/namespaces/garden-dev/secrets/s",
		"/api/v1/namespaces/garden-dev/serviceaccounts/robot"} {
		if code, out := h.Do(t, "GET", p, nil); code != 200 {
			t.Errorf("GET %s after kubectl create: %d %s", p, code, out)
		}
	}
	if _, out := h.Do(t, "GET", "/api/v1/namespaces/garden-dev/configmaps/c", nil); !strings.Contains(string(out), `"data":{"a":"b"}`) {
		t.Errorf("config map created in protobuf: %s", out)
	}

	// client-go with protobuf bodies and answers.
	cfg := &clientrest.Config{Host: h.URL, BearerToken: h.Token, TLSClientConfig: clientrest.TLSClientConfig{CAData: h.CA},
		ContentConfig: clientrest.ContentConfig{ContentType: runtime.ContentTypeProtobuf, AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cms := cs.CoreV1().ConfigMaps("garden-dev")
	w, err := cms.Watch(ctx, kmetav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: kmetav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"x": "1"}}, kmetav1.CreateOptions{})
	if err != nil || created.Data["x"] != "1" || created.ResourceVersion == "" {
		t.Fatalf("create: %v %+v", err, created)
	}
	created.Data["x"] = "2"
	updated, err := cms.Update(ctx, created, kmetav1.UpdateOptions{})
	if err != nil || updated.Data["x"] != "2" || updated.ResourceVersion == created.ResourceVersion {
		t.Fatalf("update: %v %+v", err, updated)
	}
	list, err := cms.List(ctx, kmetav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v %+v", err, list)
	}
	seen := map[watch.EventType]bool{}
	for !seen[watch.Modified] {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == "pb" {
				seen[ev.Type] = true
			}
		case <-ctx.Done():
			t.Fatalf("watch: saw %v, no MODIFIED of pb", seen)
		}
	}
	if !seen[watch.Added] {
		t.Errorf("watch: no ADDED of pb before MODIFIED")
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "garden-dev", kmetav1.GetOptions{}); err != nil {
		t.Errorf("get namespace in protobuf: %v", err)
	}
	sa, err := cs.CoreV1().ServiceAccounts("garden-dev").Create(ctx, &corev1.ServiceAccount{ObjectMeta: kmetav1.ObjectMeta{Name: "pb"}}, kmetav1.CreateOptions{})
	if err != nil || sa.UID == "" {
		t.Errorf("create service account: %v %+v", err, sa)
	}

	// Answers are protobuf for Kubernetes' kinds when asked first, JSON for Gardener's.
	if code, out := h.Do(t, "GET", "/api/v1/namespaces/garden-dev/configmaps/c", nil, "Accept", runtime.ContentTypeProtobuf+", application/json"); code != 200 || !strings.HasPrefix(string(out), "k8s\x00") {
		t.Errorf("config map in protobuf: %d %q", code, out)
	}
	if code, out := h.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/cloudprofiles", nil, "Accept", runtime.ContentTypeProtobuf+", application/json"); code != 200 || !strings.HasPrefix(string(out), "{") {
		t.Errorf("cloud profiles asked in protobuf first: want JSON, got %d %q", code, out)
	}

	// A watch asked in protobuf is Kubernetes' protobuf watch stream: length-prefixed metav1.WatchEvent frames whose
	// objects are the kind's protobuf; for Gardener's kinds JSON lines.
	code, out := h.Do(t, "GET", "/api/v1/namespaces/garden-dev/configmaps?watch=true&timeoutSeconds=1", nil, "Accept", runtime.ContentTypeProtobuf+";stream=watch")
	if code != 200 {
		t.Fatalf("protobuf watch: %d %q", code, out)
	}
	dec := streaming.NewDecoder(framer.NewLengthDelimitedFrameReader(io.NopCloser(bytes.NewReader(out))), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	var names []string
	for {
		var ev kmetav1.WatchEvent
		if _, _, err := dec.Decode(nil, &ev); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("protobuf watch frame: %v (%q)", err, out)
			}
			break
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(ev.Object.Raw, nil, nil)
		cm, ok := obj.(*corev1.ConfigMap)
		if err != nil || !ok || ev.Type != "ADDED" {
			t.Fatalf("protobuf watch event %s: %v %T", ev.Type, err, obj)
		}
		names = append(names, cm.Name)
	}
	if strings.Join(names, ",") != "c,pb" {
		t.Errorf("protobuf watch: want ADDED c and pb, got %v", names)
	}
	if code, out := h.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/cloudprofiles?watch=true&timeoutSeconds=1", nil, "Accept", runtime.ContentTypeProtobuf+";stream=watch, application/json"); code != 200 || len(out) > 0 && out[0] != '{' {
		t.Errorf("Gardener kind's watch asked in protobuf: want JSON lines, got %d %q", code, out)
	}

	// A Gardener kind in protobuf is refused with 415 (its type is not in k8s.io/api).
	envelope, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot"}, Raw: []byte{0x0a, 0x00}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	code, out = h.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots", append([]byte("k8s\x00"), envelope...),
		"Content-Type", runtime.ContentTypeProtobuf)
	if code != 415 || !strings.Contains(string(out), "Shoot") {
		t.Errorf("shoot in protobuf: want 415, got %d %s", code, out)
	}
}
