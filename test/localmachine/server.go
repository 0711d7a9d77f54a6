package localmachine

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/extsdk/provider/local"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/timescale"
)

// Config configures the machine provider.
type Config struct {
	// Parent is the slot of the seed's running node: machines' links join its network namespace.
	Parent *localnode.Slot
	// Testbin is bin/testbin of `make testbin` (kubelet, containerd, the pause and busybox images).
	Testbin string
	// Dir holds a directory per machine: its configuration files and the logs of its processes.
	Dir string
	// Token is the bearer token every request must carry.
	Token string
	// Images are further image archives every machine imports.
	Images []string
	// Log receives the provider's progress; nil discards it.
	Log *slog.Logger
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Parent == nil {
		errs = append(errs, errors.New("parent: no slot of the seed's node"))
	}
	if c.Testbin == "" {
		errs = append(errs, errors.New("testbin: empty"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: empty"))
	}
	if len(c.Token) < 16 {
		errs = append(errs, errors.New("token: shorter than 16 characters"))
	}
	return errors.Join(errs...)
}

// Server is the machine provider; Handler serves its API.
type Server struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	machines map[string]*machine
	closed   bool
	stopErrs []error // of machines' node Stops (leftovers among them), for tests
}

// machine is one machine; ready is closed once its start has ended (node set, or err).
type machine struct {
	name  string
	ready chan struct{}
	node  *localnode.Node
	err   error
}

// New returns a machine provider without machines.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("localmachine: %w", err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, machines: map[string]*machine{}}, nil
}

// Handler serves the API (doc.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /machines/{name}", s.create)
	mux.HandleFunc("GET /machines/{name}", s.get)
	mux.HandleFunc("DELETE /machines/{name}", s.delete)
	mux.HandleFunc("GET /machines", s.list)
	return s.authorized(mux)
}

func (s *Server) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxBody bounds a request body: user data of a few KiB.
const maxBody = 1 << 20

// machineFiles is what a machine takes from its user data: the kubelet's bootstrap kubeconfig, and the cluster DNS
// address and domain of its kubelet configuration (empty: the machine's defaults).
type machineFiles struct {
	kubeconfig         []byte
	clusterDNS, domain string
	taints             []corev1.Taint
}

// decodeSpec reads a PUT's body: a local.MachineSpec whose user data holds a bootstrap kubeconfig.
func decodeSpec(body []byte) (local.MachineSpec, machineFiles, error) {
	var spec local.MachineSpec
	var mf machineFiles
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, mf, fmt.Errorf("body: %w", err)
	}
	kc, err := bootstrapKubeconfig(spec.UserData)
	if err != nil {
		return spec, mf, err
	}
	if _, err := clientcmd.Load(kc); err != nil {
		return spec, mf, fmt.Errorf("userData: %s: %w", BootstrapKubeconfigPath, err)
	}
	for k, v := range spec.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			return spec, mf, fmt.Errorf("labels: key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			return spec, mf, fmt.Errorf("labels[%s]: %s", k, msg)
		}
	}
	dns, domain, taints, err := kubeletConfig(spec.UserData)
	if err != nil {
		return spec, mf, err
	}
	return spec, machineFiles{kubeconfig: kc, clusterDNS: dns, domain: domain, taints: taints}, nil
}

func validName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("name %q: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := validName(name); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	spec, files, err := decodeSpec(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "the machine provider is shutting down", http.StatusServiceUnavailable)
		return
	}
	m, exists := s.machines[name]
	if !exists {
		m = &machine{name: name, ready: make(chan struct{})}
		s.machines[name] = m
	}
	s.mu.Unlock()
	code := http.StatusOK
	if !exists {
		code = http.StatusCreated
		// The start outlives the request: a client that gives up asks again and finds the machine.
		s.start(m, spec, files)
	}
	select {
	case <-m.ready:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, code, status(m))
}

// start starts machine m in the background; m.ready is closed when it runs or failed. A failed machine is removed
// from the table, so that the next PUT tries again.
func (s *Server) start(m *machine, spec local.MachineSpec, files machineFiles) {
	go func() { // owned by m.ready: Close and delete wait for it
		defer close(m.ready)
		begin := time.Now()
		slot, err := localnode.Reserve(-1)
		if err != nil {
			m.err = err
			s.forget(m)
			return
		}
		// Scaled (test/timescale): a machine imports the control plane's images too (it may become a ManagedSeed's
		// node), which took longer than 3 minutes on a loaded 2-core machine.
		ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(3*time.Minute))
		defer cancel()
		m.node, m.err = localnode.Start(ctx, localnode.Config{Slot: slot, Dir: filepath.Join(s.cfg.Dir, m.name), Testbin: s.cfg.Testbin,
			Images: s.cfg.Images, Log: s.log, Machine: &localnode.Machine{Parent: s.cfg.Parent, NodeName: m.name,
				BootstrapKubeconfig: files.kubeconfig, Labels: spec.Labels, ClusterDNS: files.clusterDNS, ClusterDomain: files.domain,
				RegisterWithTaints: files.taints}})
		if m.err != nil {
			s.log.Error("machine failed", "machine", m.name, "err", m.err)
			s.forget(m)
			return
		}
		s.log.Info("machine running", "machine", m.name, "slot", slot.Index, "in", time.Since(begin).Round(time.Millisecond))
	}()
}

func (s *Server) forget(m *machine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.machines[m.name] == m {
		delete(s.machines, m.name)
	}
}

func status(m *machine) local.MachineStatus {
	if m.err != nil {
		return local.MachineStatus{Name: m.name, Phase: local.MachinePhaseFailed, Message: m.err.Error()}
	}
	return local.MachineStatus{Name: m.name, Phase: local.MachinePhaseRunning}
}

func (s *Server) lookup(name string) *machine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.machines[name]
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	m := s.lookup(r.PathValue("name"))
	if m == nil {
		http.Error(w, "machine not found", http.StatusNotFound)
		return
	}
	select {
	case <-m.ready:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusOK, status(m))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ms := make([]*machine, 0, len(s.machines))
	for _, m := range s.machines {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	out := make([]local.MachineStatus, 0, len(ms))
	for _, m := range ms {
		select {
		case <-m.ready:
			out = append(out, status(m))
		case <-r.Context().Done():
			return
		}
	}
	slices.SortFunc(out, func(a, b local.MachineStatus) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	m := s.lookup(r.PathValue("name"))
	if m == nil {
		http.Error(w, "machine not found", http.StatusNotFound)
		return
	}
	if err := s.stop(m); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, local.MachineStatus{Name: m.name})
}

// stop waits for m's start, stops its node (removing everything it made) and forgets it.
func (s *Server) stop(m *machine) error {
	<-m.ready
	var err error
	if m.node != nil {
		// The Node goes first, while the kubelet's credentials are valid (the shoot's API may be gone already: a
		// deleted shoot's machines are stopped all the same).
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := m.node.Deregister(ctx); err != nil {
			s.log.Info("machine's Node not deleted", "machine", m.name, "err", err)
		}
		cancel()
		err = m.node.Stop()
		s.log.Info("machine deleted", "machine", m.name, "err", err)
	}
	s.forget(m)
	if err != nil {
		s.mu.Lock()
		s.stopErrs = append(s.stopErrs, fmt.Errorf("machine %s: %w", m.name, err))
		s.mu.Unlock()
	}
	return err
}

// StopErrors returns what the deletions of machines so far failed with, for tests: a node's Stop fails when it
// leaves anything on the machine, checked while it still holds its slot.
func (s *Server) StopErrors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stopErrs)
}

// Close refuses new machines and stops every machine.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ms := make([]*machine, 0, len(s.machines))
	for _, m := range s.machines {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, s.stop(m))
	}
	return errors.Join(errs...)
}

// Machines returns the machines' names and slots, for tests (localnode.Leftovers of each slot after deletion).
func (s *Server) Machines() map[string]*localnode.Slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*localnode.Slot{}
	for name, m := range s.machines {
		select {
		case <-m.ready:
			if m.node != nil {
				out[name] = m.node.Slot()
			}
		default:
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
