package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/store"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Event types, as Kubernetes spells them.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Recorder writes Kubernetes Events about objects for a controller, as client-go's recorder does: an event with the
// same object, type, reason and message as an earlier one increments its count and moves its lastTimestamp instead
// of making a new Event. Events of cluster-scoped objects go to namespace "default". Recording never fails the
// caller: an event that cannot be written is logged.
type Recorder struct {
	// Events is the store collection of Events.
	Events *store.Collection
	// Component names the reporter (source.component, reportingComponent), e.g. "gardener-controller-manager".
	Component string
	// Clock stamps the events (default the real clock).
	Clock clock.PassiveClock
	// Log receives failures to record (default discarded).
	Log *slog.Logger
	// Coalesce, when set, bounds how often one event is written: a repetition within Coalesce of the event's last
	// write is only counted in memory, and the count goes out with the first repetition after that. A controller
	// retrying a failing object with backoff then writes its event about once per Coalesce instead of once per
	// attempt — what the spam filter and the series of Kubernetes' recorders do. Counts of repetitions that are
	// never followed by one after the window are not written (as events the spam filter drops are not).
	Coalesce time.Duration

	mu     sync.Mutex
	recent map[string]*recentEvent // by namespace/name of the Event, with Coalesce
}

// recentEvent is an event written lately and the repetitions not written since.
type recentEvent struct {
	written time.Time
	pending int32
}

// maxRecent bounds the events a Recorder remembers for Coalesce.
const maxRecent = 8192

// coalesce says how many occurrences to write now for the event at key (namespace/name), 0 for none (counted).
func (r *Recorder) coalesce(key string, now time.Time) int32 {
	if r.Coalesce <= 0 {
		return 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.recent[key]
	if e != nil && now.Sub(e.written) < r.Coalesce {
		e.pending++
		return 0
	}
	n := int32(1)
	if e != nil {
		n += e.pending
	}
	if r.recent == nil || len(r.recent) >= maxRecent {
		for k, old := range r.recent {
			if now.Sub(old.written) >= r.Coalesce {
				delete(r.recent, k)
			}
		}
		if len(r.recent) >= maxRecent {
			clear(r.recent)
		}
		if r.recent == nil {
			r.recent = map[string]*recentEvent{}
		}
	}
	r.recent[key] = &recentEvent{written: now}
	return n
}

// Eventf records an event about obj (apiVersion and kind are those of its message type as Gardener names them).
func (r *Recorder) Eventf(ctx context.Context, obj store.Object, eventType, reason, format string, args ...any) {
	if r == nil || r.Events == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	md := obj.GetMetadata()
	ns := md.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	apiVersion, kind := typeMeta(obj)
	sum := sha256.Sum256([]byte(strings.Join([]string{kind, md.GetName(), md.GetUid(), eventType, reason, msg}, "\x00")))
	name := fmt.Sprintf("%s.%s", md.GetName(), hex.EncodeToString(sum[:8]))
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	count := r.coalesce(ns+"/"+name, now)
	if count == 0 {
		return
	}
	ts := timestamppb.New(now.Truncate(time.Second))
	_, err := r.Events.GuaranteedUpdate(ctx, ns, name, false, func(cur store.Object) (store.Object, error) {
		ev := cur.(*kcorev1.Event)
		ev.Count = proto.Int32(ev.GetCount() + count)
		ev.LastTimestamp = ts
		return ev, nil
	})
	if apierrors.IsNotFound(err) {
		_, err = r.Events.Create(ctx, &kcorev1.Event{ApiVersion: "v1", Kind: "Event",
			Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name},
			InvolvedObject: &metav1.ObjectReference{ApiVersion: apiVersion, Kind: kind, Namespace: md.GetNamespace(),
				Name: md.GetName(), Uid: md.GetUid(), ResourceVersion: md.GetResourceVersion()},
			Type: eventType, Reason: reason, Message: msg, Count: proto.Int32(count),
			FirstTimestamp: ts, LastTimestamp: ts,
			Source:             &kcorev1.EventSource{Component: r.Component},
			ReportingComponent: r.Component,
		})
		if apierrors.IsAlreadyExists(err) { // recorded concurrently: count this one too
			r.Eventf(ctx, obj, eventType, reason, format, args...)
			return
		}
	}
	if err != nil && r.Log != nil {
		r.Log.Warn("recording an event failed", "kind", kind, "namespace", md.GetNamespace(), "name", md.GetName(), "reason", reason, "err", err)
	}
}

// typeMeta returns the apiVersion and kind an object carries, or, when it carries none, those its message type
// stands for (the proto package trellis.core.v1beta1 is core.gardener.cloud/v1beta1).
func typeMeta(obj store.Object) (apiVersion, kind string) {
	m := obj.ProtoReflect()
	fields := m.Descriptor().Fields()
	if f := fields.ByName("api_version"); f != nil {
		apiVersion = m.Get(f).String()
	}
	if f := fields.ByName("kind"); f != nil {
		kind = m.Get(f).String()
	}
	if kind == "" {
		kind = string(m.Descriptor().Name())
	}
	if apiVersion == "" {
		pkg := strings.TrimPrefix(string(m.Descriptor().ParentFile().Package()), "trellis.")
		group, version, _ := strings.Cut(pkg, ".")
		switch {
		case strings.HasPrefix(pkg, "kubernetes.core."):
			apiVersion = "v1"
		case strings.HasPrefix(pkg, "kubernetes."):
			parts := strings.Split(pkg, ".")
			apiVersion = parts[1] + ".k8s.io/" + parts[len(parts)-1]
		default:
			apiVersion = group + ".gardener.cloud/" + version
		}
	}
	return apiVersion, kind
}
