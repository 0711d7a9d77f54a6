package tunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/auth"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// SeedAPIPrefix is the path of a seed's API on the hub's main port: a kubeconfig's server is
// https://<hub>/tunnels/seeds/<seed>.
const SeedAPIPrefix = "/tunnels/seeds/"

// SeedAPIPath is the server path of seed's API.
func SeedAPIPath(seed string) string { return SeedAPIPrefix + seed }

// Authorize decides whether an authenticated request may use a seed's API: cluster admins only.
type Authorize func(r *http.Request) (auth.User, error)

type seedKey struct{}

// SeedAPI returns the handler of SeedAPIPrefix: it authenticates and authorizes the user with authorize, then
// forwards the request through the seed's agent, which impersonates the user on the seed (Impersonate-User and
// Impersonate-Group; whatever Impersonate-* and Authorization headers the request carried are dropped). Upgrades
// (exec, attach, port-forward over SPDY or WebSocket) pass through. A seed without a connected agent is a 503.
func (t *Tunnels) SeedAPI(authorize Authorize, writeError func(http.ResponseWriter, error)) http.Handler {
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			seed, _, err := net.SplitHostPort(addr) // the request's host is the seed (Rewrite)
			if err != nil {
				return nil, err
			}
			c, err := t.cfg.Dialer.DialTunnel(ctx, seed, &agentv1.TunnelTarget{Kind: agentv1.TunnelTarget_KIND_SEED_API_SERVER})
			if errors.Is(err, agentlink.ErrNotConnected) {
				// The agent's session may be with another replica: that one opens the tunnel.
				if fwd, ferr := t.forwardSeedAPI(ctx, seed); ferr != nil {
					err = fmt.Errorf("%w; %w", err, ferr)
				} else if fwd != nil {
					c, err = fwd, nil
					t.metrics.forwards.WithLabelValues(kindSeedAPI, "out").Inc()
				}
			}
			if err != nil {
				t.metrics.failures.WithLabelValues(kindSeedAPI, failureReason(err)).Inc()
				return nil, err
			}
			return t.metrics.counted(kindSeedAPI, c, func() {}), nil
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     min(t.cfg.IdleTimeout, 90e9),
		DisableCompression:  true, // the client's Accept-Encoding passes through
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			seed, _ := r.In.Context().Value(seedKey{}).(string)
			u, _ := auth.UserFrom(r.In.Context())
			// The host names the seed, so that the transport pools tunnels per seed.
			r.SetURL(&url.URL{Scheme: "http", Host: seed})
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, SeedAPIPath(seed))
			r.Out.URL.RawPath = ""
			r.Out.Header.Del("Authorization")
			for k := range r.Out.Header {
				if strings.HasPrefix(http.CanonicalHeaderKey(k), "Impersonate-") {
					r.Out.Header.Del(k)
				}
			}
			r.Out.Header.Set("Impersonate-User", u.Name)
			for _, g := range u.Groups {
				r.Out.Header.Add("Impersonate-Group", g)
			}
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			seed, _ := r.Context().Value(seedKey{}).(string)
			if errors.Is(err, agentlink.ErrNotConnected) {
				writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("seed %q: its agent is not connected to this hub", seed)))
				return
			}
			t.cfg.Log.Info("seed API request failed", "seed", seed, "path", r.URL.Path, "err", err)
			writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("seed %q: %v", seed, err)))
		},
	}
	// Watches and logs -f stay open for long and carry little: their copy holds a small buffer while it waits, not
	// the proxy's 32 KiB (a thousand open watches would hold 32 MB of buffers).
	streaming := *proxy
	streaming.BufferPool = smallBuffers{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seed, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, SeedAPIPrefix), "/")
		if errs := validation.IsDNS1123Subdomain(seed); len(errs) > 0 {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("seed %q in path: %s", seed, strings.Join(errs, "; "))))
			return
		}
		u, err := authorize(r)
		if err != nil {
			writeError(w, err)
			return
		}
		release, err := t.limits.acquire("seed-api/"+seed, "user/"+u.Name)
		if err != nil {
			t.metrics.failures.WithLabelValues(kindSeedAPI, "limit").Inc()
			writeError(w, apierrors.NewTooManyRequests(err.Error(), 1))
			return
		}
		defer release()
		ctx := context.WithValue(auth.WithUser(r.Context(), u), seedKey{}, seed)
		if long := r.URL.Query(); long.Get("watch") == "true" || long.Get("watch") == "1" || long.Get("follow") == "true" {
			streaming.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		proxy.ServeHTTP(w, r.WithContext(ctx))
	})
}

// smallBuffers hands the seed API's proxy 4 KiB copy buffers for long-running requests (httputil.BufferPool).
type smallBuffers struct{}

var smallBufferPool = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

func (smallBuffers) Get() []byte { return *smallBufferPool.Get().(*[]byte) }

func (smallBuffers) Put(b []byte) {
	if cap(b) == 4<<10 {
		smallBufferPool.Put(&b)
	}
}
