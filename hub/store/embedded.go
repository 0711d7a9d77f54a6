package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Settings of the embedded single-member etcd. Short ticks make a fresh member elect itself within tens of
// milliseconds; a single member has no peers to disturb with them.
const (
	embeddedTickMs     = 10
	embeddedElectionMs = 100
	embeddedQuotaBytes = 8 << 30
	embeddedCompaction = "5m"
	// embeddedCatchUpEntries is how many applied raft entries the member keeps in memory after a snapshot of its
	// state (etcd takes one every 100 entries): they are there for followers that fell behind, and the embedded
	// member has none. etcd's default, 5,000, held the last 5,000 writes' requests (a shoot's write is about 10 KB)
	// in the hub's heap.
	embeddedCatchUpEntries  = 100
	embeddedReadyTimeout    = 60 * time.Second
	embeddedName            = "trellis"
	embeddedDefaultListen   = "http://127.0.0.1:0"
	embeddedDefaultPeerURLs = "http://127.0.0.1:0"
)

// startEmbedded starts the embedded etcd under cfg.DataDir/etcd and returns it with the client endpoint to dial.
func startEmbedded(ctx context.Context, cfg Config, lg *zap.Logger) (*embed.Etcd, string, error) {
	ec := embed.NewConfig()
	ec.Name = embeddedName
	ec.Dir = filepath.Join(cfg.DataDir, "etcd")
	listen := cfg.EtcdListen
	if listen == "" {
		listen = embeddedDefaultListen
	}
	lcurl, err := url.Parse(listen)
	if err != nil {
		return nil, "", fmt.Errorf("store: EtcdListen %q: %w", listen, err)
	}
	// The peer listener is required by etcd even for one member; port 0 keeps it out of the way. The member's peer URL
	// is recorded in its data, so it must stay the same string across restarts, which "port 0" does.
	lpurl, _ := url.Parse(embeddedDefaultPeerURLs)
	ec.ListenClientUrls = []url.URL{*lcurl}
	ec.AdvertiseClientUrls = []url.URL{*lcurl}
	ec.ListenPeerUrls = []url.URL{*lpurl}
	ec.AdvertisePeerUrls = []url.URL{*lpurl}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.TickMs = embeddedTickMs
	ec.ElectionMs = embeddedElectionMs
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = embeddedCompaction
	ec.QuotaBackendBytes = embeddedQuotaBytes
	ec.SnapshotCatchUpEntries = embeddedCatchUpEntries
	ec.LogLevel = "error"
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.Metrics = "basic"

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, "", fmt.Errorf("store: start embedded etcd in %s: %w", ec.Dir, err)
	}
	timer := time.NewTimer(embeddedReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("store: embedded etcd failed: %w", err)
	case <-e.Server.StopNotify():
		e.Close()
		return nil, "", errors.New("store: embedded etcd stopped while starting")
	case <-timer.C:
		e.Close()
		return nil, "", fmt.Errorf("store: embedded etcd not ready after %s", embeddedReadyTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, "", fmt.Errorf("store: embedded etcd start: %w", ctx.Err())
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, "", errors.New("store: embedded etcd has no client listener")
	}
	// The listener knows the real port when the URL asked for port 0.
	addr := e.Clients[0].Addr()
	return e, lcurl.Scheme + "://" + addr.String(), nil
}

// EmbeddedMember is the embedded etcd member of a data directory: its directory, name and peer URL, which a restored
// snapshot must be given (package backup) for the member to start from it.
func EmbeddedMember(dataDir string) (dir, name, peerURL string) {
	return filepath.Join(dataDir, "etcd"), embeddedName, embeddedDefaultPeerURLs
}
