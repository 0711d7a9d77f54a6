package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// registerWatch serves the kind's REST watch paths in-process, replacing the gateway's (gRPC-only) Watch route:
// events go from the watch cache to the client as Kubernetes watch lines, with each object's memoized JSON, without
// a protobuf round trip. gRPC clients use Watch.
func (s *Server[T, L, E, PE]) registerWatch(mux *runtime.ServeMux, objectJSON func(obj store.Object) ([]byte, bool), paths ...string) error {
	for _, p := range paths {
		if err := mux.HandlePath(http.MethodGet, p, func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			s.serveWatch(w, r, params["namespace"], objectJSON)
		}); err != nil {
			return err
		}
	}
	return nil
}

// isTrue reads a boolean query parameter as Kubernetes' parameter codec does (strconv.ParseBool).
func isTrue(v string) bool {
	b, _ := strconv.ParseBool(v)
	return b
}

func (s *Server[T, L, E, PE]) serveWatch(w http.ResponseWriter, r *http.Request, namespace string, objectJSON func(store.Object) ([]byte, bool)) {
	q := r.URL.Query()
	if err := s.checkScope(namespace); err != nil {
		gateway.WriteError(w, s.reg.errors.Public(r.Context(), err))
		return
	}
	ls, fs, err := parseSelectors(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		gateway.WriteError(w, s.reg.errors.Public(r.Context(), err))
		return
	}
	ctx := r.Context()
	visible, err := s.authorizeCollection(ctx, VerbWatch, namespace)
	if err != nil {
		gateway.WriteError(w, s.reg.errors.Public(r.Context(), err))
		return
	}
	// The options are validated by the gateway (kube-apiserver's ListOptions).
	bookmarks := isTrue(q.Get("allowWatchBookmarks"))
	initial := isTrue(q.Get("sendInitialEvents"))
	from, err := s.watchStart(ctx, q.Get("resourceVersion"), initial, bookmarks)
	if err != nil {
		gateway.WriteError(w, err)
		return
	}
	vis := newVisibility(visible, from)
	if t := q.Get("timeoutSeconds"); t != "" {
		secs, err := strconv.ParseInt(t, 10, 64)
		if err != nil || secs < 0 {
			gateway.WriteError(w, apierrors.NewBadRequest("timeoutSeconds must be a non-negative integer"))
			return
		}
		if secs > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(secs)*time.Second)
			defer cancel()
		}
	}
	wt, err := s.coll.Watch(ctx, namespace, store.WatchOptions{ResourceVersion: from, Labels: ls, Fields: fs, Bookmarks: bookmarks, InitialEventsEnd: initial})
	if err != nil {
		gateway.WriteError(w, s.reg.errors.Public(r.Context(), err))
		return
	}
	defer wt.Stop()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", gateway.MIMEJSON)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	var line []byte
	unflushed := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wt.Events():
			if !ok {
				return
			}
			if ev, ok = vis.filter(ev); !ok {
				// What was written waits for no more events.
				if unflushed && flusher != nil && len(wt.Events()) == 0 {
					flusher.Flush()
					unflushed = false
				}
				continue
			}
			line = line[:0]
			if ev.Type == store.Error {
				line = gateway.AppendWatchError(line, s.reg.errors.Public(ctx, ev.Err))
			} else {
				obj, err := s.watchObject(ev)
				if err != nil {
					line = gateway.AppendWatchError(line, s.reg.errors.Public(ctx, err))
				} else {
					body, ok := objectJSON(obj)
					if !ok {
						if body, err = kjson.Marshal(obj); err != nil {
							line = gateway.AppendWatchError(line, s.reg.errors.Public(ctx, apierrors.NewInternalError(err)))
						}
					}
					if len(line) == 0 {
						line = append(line, `{"type":"`...)
						line = append(line, ev.Type...)
						line = append(line, `","object":`...)
						line = append(line, body...)
						line = append(line, "}\n"...)
					}
				}
			}
			if _, err := w.Write(line); err != nil { //nolint:gosec // G705: JSON watch events served as application/json, not HTML
				return
			}
			// Flush when the client has everything queued so far: bursts go out in few frames.
			unflushed = true
			if flusher != nil && len(wt.Events()) == 0 {
				flusher.Flush()
				unflushed = false
			}
			if ev.Type == store.Error {
				return
			}
		}
	}
}
