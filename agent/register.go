package agent

import (
	"context"
	"fmt"
	"maps"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/backoff"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// registerTimeout bounds each call of the registration.
const registerTimeout = 30 * time.Second

// registerSeed creates or updates the agent's Seed from seedConfig, as gardenlet does on start, retrying until it
// succeeds or the session ends. It uses the session's connection, so the hub sees the agent's mTLS identity.
func (s *session) registerSeed(ctx context.Context, conn grpc.ClientConnInterface) {
	client := corev1beta1.NewSeedServiceClient(conn)
	b := &backoff.Backoff{Initial: time.Second, Max: 30 * time.Second, Rand: s.a.rand}
	for {
		err := s.a.registerSeed(ctx, client)
		if err == nil {
			s.a.seedRegistered.Store(true)
			return
		}
		if ctx.Err() != nil {
			return
		}
		d := b.Next(time.Now())
		s.log.Error("seed registration failed; retrying", "err", err, "retryIn", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// registerSeed creates the Seed, or updates the spec, labels and annotations of an existing one. An up-to-date Seed
// is left alone.
func (a *Agent) registerSeed(ctx context.Context, client corev1beta1.SeedServiceClient) error {
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	desired := proto.Clone(a.cfg.SeedConfig.Seed).(*corev1beta1.Seed)
	desired.ApiVersion, desired.Kind, desired.Status = "core.gardener.cloud/v1beta1", "Seed", nil
	if desired.Metadata == nil {
		desired.Metadata = &metav1.ObjectMeta{Name: a.seedName}
	}
	desired.Metadata.ResourceVersion = ""

	cur, err := client.Get(ctx, &metav1.GetRequest{Name: a.seedName})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		if _, err := client.Create(ctx, desired); err != nil {
			return fmt.Errorf("create seed %s: %w", a.seedName, err)
		}
		a.log.Info("seed registered", "action", "created")
		return nil
	default:
		return fmt.Errorf("get seed %s: %w", a.seedName, err)
	}
	upd := proto.Clone(cur).(*corev1beta1.Seed)
	if upd.Metadata == nil {
		upd.Metadata = &metav1.ObjectMeta{Name: a.seedName}
	}
	upd.Spec = desired.Spec
	upd.Metadata.Labels = merge(upd.Metadata.Labels, desired.Metadata.Labels)
	upd.Metadata.Annotations = merge(upd.Metadata.Annotations, desired.Metadata.Annotations)
	if proto.Equal(upd, cur) {
		a.log.Info("seed registered", "action", "unchanged")
		return nil
	}
	if _, err := client.Update(ctx, upd); err != nil {
		return fmt.Errorf("update seed %s: %w", a.seedName, err)
	}
	a.log.Info("seed registered", "action", "updated")
	return nil
}

// merge returns base with the entries of over set (base's other entries stay).
func merge(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = make(map[string]string, len(over))
	}
	maps.Copy(out, over)
	return out
}
