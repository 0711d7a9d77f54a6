package hub

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	openapidocs "github.com/trellis-dev/trellis/docs/openapi"
	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/agentlink"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/audit"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/controller/protection"
	"github.com/trellis-dev/trellis/hub/csr"
	"github.com/trellis-dev/trellis/hub/leader"
	"github.com/trellis-dev/trellis/hub/openapi"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/scheduler"
	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// The parts of a replica, each built from what it needs, in the order Run builds them.

// replica is a running replica's parts, kept for the package's own tests (export_test.go).
type replica struct {
	Parts
	elector *leader.Elector
}

// openStore opens etcd, embedded in DataDir or the external cluster, with the keys for encryption at rest.
func (h *Hub) openStore(ctx context.Context) (*store.Store, error) {
	keys, err := loadOrCreateKeys(h.cfg.EncryptionKeyFile)
	if err != nil {
		return nil, err
	}
	etcdTLS, err := h.etcdTLS()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, store.Config{
		DataDir: h.cfg.DataDir, Endpoints: h.cfg.EtcdEndpoints, TLS: etcdTLS, EncryptionKeys: keys,
		WatchWindow: h.cfg.WatchWindow, WatchWindowAge: h.cfg.WatchWindowAge, Logger: h.log.With("component", "store"), Traces: h.traces,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}

// openPKI loads the hub's CA and its rotation from the store (creating the CA on first start) and sets up the
// replica's TLS material from it (trust): the serving certificate for the hub's names, the client CAs, and the trust
// bundle in DataDir/pki/ca.crt.
func (h *Hub) openPKI(ctx context.Context, st *store.Store) (*pki.Authority, *trust, error) {
	authority, err := pki.OpenAuthority(ctx, st.Client(), st.Prefix()+"/pki/ca", st)
	if err != nil {
		return nil, nil, err
	}
	hosts := append([]string{"127.0.0.1", "::1", "localhost"}, h.cfg.Hosts...)
	if hn, err := os.Hostname(); err == nil {
		hosts = append(hosts, hn)
	}
	if host, _, _ := net.SplitHostPort(h.cfg.Listen); host != "" && host != "0.0.0.0" && host != "::" {
		hosts = append(hosts, host)
	}
	var fixed *tls.Certificate
	if h.cfg.TLSCertFile != "" {
		serving, err := tls.LoadX509KeyPair(h.cfg.TLSCertFile, h.cfg.TLSKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("tls-cert-file: %w", err)
		}
		fixed = &serving
	}
	t, err := newTrust(authority, hosts, filepath.Join(h.cfg.DataDir, "pki", "ca.crt"), fixed, h.log.With("component", "pki"))
	if err != nil {
		return nil, nil, err
	}
	return authority, t, nil
}

// initialAdminToken reads AdminTokenFile: the token, trimmed; "" without the file.
func (h *Hub) initialAdminToken() (string, error) {
	if h.cfg.AdminTokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(h.cfg.AdminTokenFile)
	if err != nil {
		return "", fmt.Errorf("admin-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("admin-token-file %s: want one token of at least 32 characters without spaces", h.cfg.AdminTokenFile)
	}
	return tok, nil
}

// seedGraph is the index of what belongs to each seed (package seedgraph), fed from the store by run; ready is closed
// once it holds the store's state. The authorizer and the agent link read it.
type seedGraph struct {
	*seedgraph.Graph
	ready chan struct{}
}

func newSeedGraph() seedGraph { return seedGraph{Graph: seedgraph.New(), ready: make(chan struct{})} }

func (g seedGraph) run(src seedgraph.Source, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error { return g.Run(ctx, src, log, g.ready) }
}

// newAPI builds the kinds' registry, registering their services in services: admission with the plugin table,
// the projects' default quotas (admission, so every replica enforces them) and the authorizer (package authz, over
// the seed graph for agents, wrapped by the auditor, which learns from it what each request is about).
func (h *Hub) newAPI(ctx context.Context, st *store.Store, services grpc.ServiceRegistrar, plugins admission.Plugins, graph seedGraph, auditor *audit.Auditor) (*api.Registry, error) {
	quotas, err := admission.NewProjectQuotas(h.cfg.Components.ControllerManager.Controllers.Project.Quotas)
	if err != nil {
		return nil, err
	}
	docs, err := openapi.Read(openapidocs.FS)
	if err != nil {
		return nil, err
	}
	patchMeta, err := openapi.PatchMeta(docs)
	if err != nil {
		return nil, err
	}
	types, err := openapi.TypeConverter(docs)
	if err != nil {
		return nil, err
	}
	return api.NewRegistry(ctx, api.Config{
		Store: st, Services: services, PatchMeta: patchMeta, TypeConverter: types,
		Indexes:         slices.Concat(authz.Indexes(), protection.Indexes(), []api.Index{{Resource: auth.AccessTokens, Name: auth.TokenHashIndex, Values: auth.TokenHashes}}),
		Admission:       plugins,
		AdmissionConfig: admission.Config{AccessTokenMaxLifetime: h.cfg.MaxTokenLifetime, Now: h.cfg.Now, AllowUnregisteredExtensions: h.cfg.AllowUnregisteredExtensions},
		CreateQuota:     quotas,
		Authorizer: func(r *api.Registry) api.Authorizer {
			return auditor.Authorizer(authz.New(authz.Config{Graph: graph.Graph, GraphReady: graph.ready, Reader: r, Index: r}))
		},
		Log: h.log.With("component", "api"),
	})
}

// newAgentLink builds the agent link (AgentService, registered in services): sessions of every replica's agents.
func (h *Hub) newAgentLink(ctx context.Context, st *store.Store, reg *api.Registry, ca *pki.Authority, graph seedGraph, services grpc.ServiceRegistrar, promReg prometheus.Registerer) (*agentlink.Server, error) {
	floor, err := restoreFloor(ctx, st)
	if err != nil {
		return nil, err
	}
	link, err := agentlink.New(agentlink.Config{
		ResumeFloor: floor,
		Source:      reg, Graph: graph.Graph, GraphReady: graph.ready, CA: ca, Etcd: st.Client(), Prefix: st.Prefix(),
		Identify:          identify,
		HubVersion:        Version,
		TunnelDomain:      h.tunnelDomain(),
		NoDataConnections: h.cfg.TunnelNoDataConnections,
		HeartbeatInterval: h.cfg.HeartbeatInterval,
		Registerer:        promReg,
		Traces:            h.traces,
		Log:               h.log.With("component", "agentlink"),
	})
	if err != nil {
		return nil, err
	}
	agentv1.RegisterAgentServiceServer(services, link)
	return link, nil
}

// leaderLoops are the loops only the leader runs, under one election: CSR approval, the seed lifecycle and the
// controller-manager's loops (controllermanager.go).
type leaderLoops struct {
	elector *leader.Elector
	loops   []func(context.Context) error
}

func (h *Hub) newLeaderLoops(st *store.Store, reg *api.Registry, plugins admission.Plugins, ca *pki.Authority) (*leaderLoops, error) {
	lifecycle := agentlink.NewLifecycle(agentlink.LifecycleConfig{
		Source: reg, Etcd: st.Client(), Prefix: st.Prefix(), MonitorPeriod: h.cfg.MonitorPeriod, ShootMonitorPeriod: h.cfg.shootMonitorPeriod,
		Log: h.log.With("component", "seed-lifecycle"),
	})
	csrs := csr.NewController(reg, ca, h.log.With("component", "csr"))
	cm, err := controllerManager(reg, plugins, h.cfg.Components.ControllerManager, h.cfg.Controllers, h.shootExternalURL(), h.log)
	if err != nil {
		return nil, err
	}
	l := &leaderLoops{
		elector: leader.New(leader.Config{Client: st.Client(), Key: st.Prefix() + "/leader", Log: h.log.With("component", "leader")}),
		loops:   []func(context.Context) error{csrs.Run, lifecycle.Run},
	}
	for _, c := range cm {
		l.loops = append(l.loops, c.Run)
	}
	return l, nil
}

// Run takes part in the election until ctx ends and runs the loops while it leads.
func (l *leaderLoops) Run(ctx context.Context) error {
	fns := make([]func(context.Context), len(l.loops))
	for i, run := range l.loops {
		fns[i] = func(ctx context.Context) { _ = run(ctx) }
	}
	return l.elector.Run(ctx, fns...)
}

// newScheduler builds the shoot scheduler (package scheduler) under its own election, as gardener-scheduler's lease
// is its own: it needs none of the agent link's controllers beside it. Its workers and strategy come from the
// SchedulerConfiguration's schedulers.shoot. Nil when the scheduler is disabled or cannot be built (logged).
func (h *Hub) newScheduler(st *store.Store, reg *api.Registry) func(context.Context) error {
	if h.cfg.DisableScheduler {
		return nil
	}
	cfg := scheduler.Config{Source: reg, Log: h.log.With("component", "scheduler")}
	if shoot := h.cfg.Components.Scheduler.Schedulers.Shoot; shoot != nil {
		if shoot.ConcurrentSyncs != nil {
			cfg.Workers = *shoot.ConcurrentSyncs
		}
		cfg.Strategy = shoot.CandidateDeterminationStrategy
	}
	sched, err := scheduler.New(cfg)
	if err != nil {
		h.log.Error("scheduler not started", "err", err)
		return nil
	}
	elector := leader.New(leader.Config{Client: st.Client(), Key: st.Prefix() + "/scheduler-leader", Log: h.log.With("component", "scheduler-leader")})
	return func(ctx context.Context) error {
		return elector.Run(ctx, func(ctx context.Context) {
			if err := sched.Run(ctx); err != nil && ctx.Err() == nil {
				h.log.Error("scheduler stopped", "err", err)
			}
		})
	}
}
