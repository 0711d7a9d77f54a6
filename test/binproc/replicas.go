package binproc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ReplicasConfig says how to run several trellis-hub replicas on one external etcd.
type ReplicasConfig struct {
	// Bin is the trellis-hub binary.
	Bin string
	// Dir holds each replica's data dir (hub-<i>/data) and log (hub-<i>.log), and the files all replicas share: the
	// encryption keys (encryption-keys) and the admin token (admin-token), which every replica must agree on.
	Dir string
	// Replicas is how many to run (at least 1).
	Replicas int
	// Args are every replica's flags: the etcd's (--etcd-endpoints and its TLS files), --heartbeat-interval, ...
	Args []string
	// ReplicaArgs, if set, returns more flags of replica i, such as its --grpc-listen address.
	ReplicaArgs func(i int) []string
	// Env is added to every replica's environment.
	Env []string
	// Hub is the template of each replica's HubConfig (ReadyTimeout, Probe, Exited); Bin, DataDir, LogPath, Args
	// and Env are set from the fields above.
	Hub HubConfig
}

// StartReplicas writes the shared encryption keys and admin token (unless they exist), starts replica 0 (the first
// start on an empty etcd creates the CA, the admin token's hash and the garden's namespaces) and then the others
// together, and waits until each is ready. On failure the replicas started are stopped.
func StartReplicas(ctx context.Context, cfg ReplicasConfig) ([]*Hub, error) {
	if cfg.Replicas < 1 {
		return nil, fmt.Errorf("replicas: want at least 1, got %d", cfg.Replicas)
	}
	keys, token := filepath.Join(cfg.Dir, "encryption-keys"), filepath.Join(cfg.Dir, "admin-token")
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := writeSecretOnce(keys, func(b []byte) string { return "key1:" + base64.StdEncoding.EncodeToString(b) }); err != nil {
		return nil, err
	}
	if err := writeSecretOnce(token, base64.RawURLEncoding.EncodeToString); err != nil {
		return nil, err
	}
	hubs := make([]*Hub, cfg.Replicas)
	errs := make([]error, cfg.Replicas)
	start := func(i int) {
		hc := cfg.Hub
		hc.Bin, hc.Env = cfg.Bin, cfg.Env
		hc.DataDir = filepath.Join(cfg.Dir, fmt.Sprintf("hub-%d", i), "data")
		hc.LogPath = filepath.Join(cfg.Dir, fmt.Sprintf("hub-%d.log", i))
		hc.Args = append(append([]string{"--encryption-key-file", keys, "--admin-token-file", token}, cfg.Args...), replicaArgs(cfg, i)...)
		// Only the replica that stores the admin token's hash writes <data dir>/admin-token; readers of a replica's
		// data dir (StartHub, AdminToken) find the shared token there in every replica.
		if errs[i] = copyFile(token, filepath.Join(hc.DataDir, "admin-token")); errs[i] != nil {
			return
		}
		hubs[i], errs[i] = StartHub(ctx, hc)
	}
	start(0)
	if errs[0] == nil {
		var wg sync.WaitGroup
		for i := 1; i < cfg.Replicas; i++ {
			wg.Go(func() { start(i) })
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			for _, h := range hubs {
				if h != nil {
					_ = h.Kill()
				}
			}
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
	}
	return hubs, nil
}

func replicaArgs(cfg ReplicasConfig, i int) []string {
	if cfg.ReplicaArgs == nil {
		return nil
	}
	return cfg.ReplicaArgs(i)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// writeSecretOnce writes encode(32 random bytes) and a newline to path (mode 0600) unless the file exists.
func writeSecretOnce(path string, encode func([]byte) string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strings.TrimSpace(encode(b))+"\n"), 0o600)
}

// IsLeader reports whether the hub's current run leads the controllers' election, from its log: the last
// "became leader" or "lost leadership" line of the elector of the control-plane loops (component=leader; the
// scheduler's has its own). Each call reads only what the log gained since the last.
func (h *Hub) IsLeader() bool {
	h.leaderMu.Lock()
	defer h.leaderMu.Unlock()
	_, started := h.Done()
	if !started.Equal(h.leaderRun) { // a new run: read its log from its start
		h.leaderRun, h.leaderRead, h.leading = started, 0, false
	}
	chunk, err := h.LogSince(h.leaderRead)
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(chunk, '\n'); i >= 0 {
		chunk = chunk[:i+1] // a line still being written is read next time
	} else {
		chunk = ""
	}
	h.leaderRead += int64(len(chunk))
	for _, line := range strings.Split(chunk, "\n") {
		if !strings.Contains(line, "component=leader ") && !strings.HasSuffix(line, "component=leader") {
			continue
		}
		switch {
		case strings.Contains(line, `msg="became leader"`):
			h.leading = true
		case strings.Contains(line, `msg="lost leadership"`):
			h.leading = false
		}
	}
	return h.leading && h.Running()
}
