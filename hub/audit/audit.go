package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"gopkg.in/natefinch/lumberjack.v2"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	kaudit "k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/plugin/pkg/audit/buffered"
	logbackend "k8s.io/apiserver/plugin/pkg/audit/log"
	"k8s.io/apiserver/plugin/pkg/audit/webhook"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store"
)

// secretResources are the resources whose bodies hold secret data: their requests are logged at Metadata at most,
// whatever the policy says (kube's example policies do the same for secrets and configmaps). AccessTokens are among
// them: their status carries the token.
var secretResources = map[string]bool{"secrets": true, "internalsecrets": true, "shootstates": true, "accesstokens": true}

// secretSubresources are the subresources whose answers hold secret data the same way: the shoots' kubeconfigs carry
// a client certificate's private key.
var secretSubresources = map[string]bool{"shoots/adminkubeconfig": true, "shoots/viewerkubeconfig": true}

// Auditor turns requests into audit events and hands them to the backends. A nil *Auditor audits nothing; its
// methods are no-ops, so the edges call them unconditionally.
type Auditor struct {
	eval    kaudit.PolicyRuleEvaluator
	backend kaudit.Backend
	closers []io.Closer
	// ObjectJSON renders a request's or response's message as the object's JSON (api.Registry.ObjectJSON).
	objectJSON func(proto.Message) ([]byte, bool)
}

// New builds the auditor for cfg; nil when cfg configures no backend. objectJSON renders messages as their objects'
// JSON for Request and RequestResponse levels.
func New(cfg Config, objectJSON func(proto.Message) ([]byte, bool)) (*Auditor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, nil
	}
	p, err := policy.LoadPolicyFromFile(cfg.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("audit-policy-file: %w", err)
	}
	a := &Auditor{eval: policy.NewPolicyRuleEvaluator(p), objectJSON: objectJSON}
	var backends []kaudit.Backend
	if cfg.LogPath != "" {
		var w io.Writer = os.Stdout
		if cfg.LogPath != "-" {
			lj := &lumberjack.Logger{Filename: cfg.LogPath, MaxAge: cfg.LogMaxAge, MaxBackups: cfg.LogMaxBackups,
				MaxSize: cfg.LogMaxSize, Compress: cfg.LogCompress}
			a.closers = append(a.closers, lj)
			w = lj
		}
		// Written synchronously, as kube-apiserver's default blocking mode: an event is in the file when the
		// response is sent.
		backends = append(backends, logbackend.NewBackend(w, logbackend.FormatJson, auditv1.SchemeGroupVersion))
	}
	if cfg.WebhookConfigFile != "" {
		backoff := cfg.WebhookInitialBackoff
		if backoff == 0 {
			backoff = 10 * time.Second
		}
		maxWait := cfg.WebhookBatchMaxWait
		if maxWait == 0 {
			maxWait = 30 * time.Second
		}
		wh, err := webhook.NewBackend(cfg.WebhookConfigFile, auditv1.SchemeGroupVersion,
			wait.Backoff{Duration: backoff, Factor: 1.5, Jitter: 0.2, Steps: 5}, nil)
		if err != nil {
			return nil, fmt.Errorf("audit-webhook-config-file: %w", err)
		}
		// Batched, as kube-apiserver's default for webhooks, so a slow webhook does not slow requests down.
		backends = append(backends, buffered.NewBackend(wh, buffered.BatchConfig{
			BufferSize: 10000, MaxBatchSize: 400, MaxBatchWait: maxWait, ThrottleEnable: true, ThrottleQPS: 10, ThrottleBurst: 15,
			AsyncDelegate: true,
		}))
	}
	a.backend = kaudit.Union(backends...)
	return a, nil
}

// Run runs the backends until ctx ends, then flushes them (the webhook's batch) and closes the log file.
func (a *Auditor) Run(ctx context.Context) error {
	if a == nil {
		<-ctx.Done()
		return nil
	}
	if err := a.backend.Run(ctx.Done()); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	<-ctx.Done()
	a.backend.Shutdown()
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// record is one request's audit state, begun by an edge and filled in as the request proceeds.
type record struct {
	mu       sync.Mutex
	a        *Auditor
	ev       auditinternal.Event
	attrs    authorizer.AttributesRecord
	level    auditinternal.Level
	omit     []auditinternal.Stage
	received bool // RequestReceived (and for watches ResponseStarted) handled
	finished bool
}

type recordKey struct{}

// Request describes a request as its edge sees it on arrival.
type Request struct {
	// ID is the hub's request id, the event's auditID.
	ID string
	// URI is the REST request's URI, or the gRPC call's full method.
	URI string
	// Verb is the authorization verb when the edge knows it ("get", "create", ...); the authorizer's replaces it.
	Verb string
	// Path is the non-resource path, for requests the typed API does not serve (metrics, discovery, gRPC methods
	// outside the kinds' services).
	Path      string
	SourceIPs []string
	UserAgent string
	// Info is the REST request's resource, when it names one (k8s.io/apiserver's RequestInfo).
	Resource *Resource
}

// Resource is what a request is about.
type Resource struct {
	APIGroup, APIVersion, Resource, Subresource, Namespace, Name string
}

// Begin starts a request's record; the returned context carries it for SetUser, Authorizer and Finish.
func (a *Auditor) Begin(ctx context.Context, r Request) context.Context {
	if a == nil {
		return ctx
	}
	now := metav1.NewMicroTime(time.Now())
	rec := &record{a: a, ev: auditinternal.Event{
		AuditID: types.UID(r.ID), RequestURI: r.URI, Verb: r.Verb, SourceIPs: r.SourceIPs, UserAgent: r.UserAgent,
		RequestReceivedTimestamp: now,
	}}
	rec.attrs = authorizer.AttributesRecord{Verb: r.Verb, Path: r.Path}
	if res := r.Resource; res != nil {
		rec.attrs.ResourceRequest = true
		rec.attrs.APIGroup, rec.attrs.APIVersion, rec.attrs.Resource = res.APIGroup, res.APIVersion, res.Resource
		rec.attrs.Subresource, rec.attrs.Namespace, rec.attrs.Name = res.Subresource, res.Namespace, res.Name
	}
	return context.WithValue(ctx, recordKey{}, rec)
}

func recordOf(ctx context.Context) *record {
	rec, _ := ctx.Value(recordKey{}).(*record)
	return rec
}

// SetUser records who made the request, once it is authenticated.
func SetUser(ctx context.Context, u auth.User) {
	rec := recordOf(ctx)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.setUser(u)
}

func (rec *record) setUser(u auth.User) {
	rec.ev.User = authnv1.UserInfo{Username: u.Name, Groups: u.Groups}
	rec.attrs.User = &user.DefaultInfo{Name: u.Name, Groups: u.Groups}
}

// Authorizer wraps the kinds' authorizer: the first time a request is authorized, its attributes become the event's
// verb and object reference (and the object written, at Request levels), and RequestReceived is emitted.
func (a *Auditor) Authorizer(inner api.Authorizer) api.Authorizer {
	if a == nil {
		return inner
	}
	return &auditingAuthorizer{inner: inner, a: a}
}

type auditingAuthorizer struct {
	inner api.Authorizer
	a     *Auditor
}

func (z *auditingAuthorizer) Authorize(ctx context.Context, at api.Attributes) error {
	if rec := recordOf(ctx); rec != nil {
		rec.authorized(at)
	}
	if z.inner == nil {
		return nil
	}
	return z.inner.Authorize(ctx, at)
}

func (z *auditingAuthorizer) Filter(ctx context.Context, at api.Attributes) func(obj store.Object) bool {
	if z.inner == nil {
		return nil
	}
	return z.inner.Filter(ctx, at)
}
