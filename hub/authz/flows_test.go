package authz_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// agentAPI is what a seed agent's shoot flows write, over gRPC with the seed's client certificate.
type agentAPI struct {
	seed    string
	shoots  corev1beta1.ShootServiceClient
	states  corev1beta1.ShootStateServiceClient
	buckets corev1beta1.BackupBucketServiceClient
	entries corev1beta1.BackupEntryServiceClient
	bastion operationsv1alpha1.BastionServiceClient
	events  kcorev1.EventServiceClient
}

// updateShootStatus writes shoot's status as the agent does: the hub's own controllers may write the shoot between
// the agent's read and its write, and like the gardenlet the agent then reads the shoot again and writes its status
// onto the newer version.
func updateShootStatus(ctx context.Context, t *testing.T, shoots corev1beta1.ShootServiceClient, shoot *corev1beta1.Shoot) *corev1beta1.Shoot {
	t.Helper()
	return writeShoot(ctx, t, shoots, shoot, shoots.UpdateStatus, func(latest *corev1beta1.Shoot) { latest.Status = shoot.Status })
}

// writeShoot writes shoot with write; on a conflict (a write of the hub's controllers came between) it reads the
// shoot again, applies change to that version and writes it, as the agent does.
func writeShoot(ctx context.Context, t *testing.T, shoots corev1beta1.ShootServiceClient, shoot *corev1beta1.Shoot,
	write func(context.Context, *corev1beta1.Shoot, ...grpc.CallOption) (*corev1beta1.Shoot, error), change func(latest *corev1beta1.Shoot),
) *corev1beta1.Shoot {
	t.Helper()
	written, err := write(ctx, shoot)
	for attempt := 0; status.Code(err) == codes.Aborted && attempt < 5; attempt++ {
		latest, gerr := shoots.Get(ctx, &metav1.GetRequest{Namespace: shoot.GetMetadata().GetNamespace(), Name: shoot.GetMetadata().GetName()})
		if gerr != nil {
			t.Fatal(gerr)
		}
		change(latest)
		written, err = write(ctx, latest)
	}
	if err != nil {
		t.Fatalf("write shoot %s/%s: %v", shoot.GetMetadata().GetNamespace(), shoot.GetMetadata().GetName(), err)
	}
	return written
}

func newAgentAPI(t *testing.T, h *hubtest.Hub, seed string) agentAPI {
	cert := clientCert(t, h, []string{auth.SeedsGroup}, auth.SeedUserName(seed))
	return newAgentAPIWith(seed, grpcConn(t, h, &cert))
}

func newAgentAPIWith(seed string, conn *grpc.ClientConn) agentAPI {
	return agentAPI{seed: seed,
		shoots: corev1beta1.NewShootServiceClient(conn), states: corev1beta1.NewShootStateServiceClient(conn),
		buckets: corev1beta1.NewBackupBucketServiceClient(conn), entries: corev1beta1.NewBackupEntryServiceClient(conn),
		bastion: operationsv1alpha1.NewBastionServiceClient(conn), events: kcorev1.NewEventServiceClient(conn),
	}
}

func bastionJSON(t *testing.T, name, seed string) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "operations.gardener.cloud/v1alpha1", "kind": "Bastion",
		"metadata": map[string]any{"name": name, "namespace": "garden-dev"},
		"spec": map[string]any{"shootRef": map[string]string{"name": "s-" + seed}, "seedName": seed,
			"sshPublicKey": strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))), "ingress": []any{map[string]any{"ipBlock": map[string]string{"cidr": "0.0.0.0/0"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSeedAgentShootFlowWrites runs, as seed a's agent, every write the gardenlet's shoot flows make in the garden —
// the finalizer on its shoot, the shoot's status, the ShootState, the seed's BackupBucket (named after the seed's
// UID) and the shoot's BackupEntry (<technicalID>--<shoot UID>, owned by the shoot), bucket, entry and Bastion
// status, events — and the same writes on seed b's objects, which are denied.
func TestSeedAgentShootFlowWrites(t *testing.T) {
	h := hubtest.Start(t)
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	garden(t, h)
	mustAdmin(t, h, 201, "POST", "/apis/operations.gardener.cloud/v1alpha1/namespaces/garden-dev/bastions", bastionJSON(t, "bastion-a", "a"))
	mustAdmin(t, h, 201, "POST", "/apis/operations.gardener.cloud/v1alpha1/namespaces/garden-dev/bastions", bastionJSON(t, "bastion-b", "b"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adminSeeds := corev1beta1.NewSeedServiceClient(h.GRPC(t))
	uid := map[string]string{}
	for _, seed := range []string{"a", "b"} {
		s, err := adminSeeds.Get(ctx, &metav1.GetRequest{Name: seed})
		if err != nil {
			t.Fatal(err)
		}
		uid[seed] = s.GetMetadata().GetUid()
	}
	a := newAgentAPI(t, h, "a")
	admin := newAgentAPIWith("", h.GRPC(t))

	// Seed a's shoot: the finalizer goes on (update) and off (patch); the status is the agent's.
	own, err := a.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatal(err)
	}
	addFinalizer := func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = append(s.Metadata.Finalizers, "gardener") }
	addFinalizer(own)
	if own = writeShoot(ctx, t, a.shoots, own, a.shoots.Update, addFinalizer); !slices.Contains(own.GetMetadata().GetFinalizers(), "gardener") {
		t.Fatalf("add the finalizer: got %v", own.GetMetadata().GetFinalizers())
	}
	now := timestamppb.New(time.Now().Truncate(time.Second))
	own.Status = &corev1beta1.ShootStatus{
		LastOperation:      &metav1.LastOperation{Type: "Create", State: "Processing", Progress: proto.Int32(42), Description: "Deploying the infrastructure", LastUpdateTime: now},
		LastErrors:         []*metav1.LastError{{Description: "quota exceeded", TaskId: proto.String("deploy-infrastructure"), Codes: []string{"ERR_INFRA_QUOTA_EXCEEDED"}, LastUpdateTime: now}},
		ObservedGeneration: proto.Int64(own.GetMetadata().GetGeneration()),
		Conditions:         []*metav1.Condition{{Type: "APIServerAvailable", Status: "Progressing", LastTransitionTime: now, LastUpdateTime: now, Reason: "Creating", Message: "m"}},
		SeedName:           proto.String("a"),
		TechnicalId:        "shoot--dev--s-a",
		Uid:                own.GetMetadata().GetUid(),
		Gardener:           &corev1beta1.Gardener{Id: "agent-a", Name: "trellis-agent", Version: "dev"},
		Hibernated:         proto.Bool(false),
	}
	written := updateShootStatus(ctx, t, a.shoots, own)
	if !proto.Equal(written.GetStatus(), own.GetStatus()) {
		t.Errorf("status written:\n%v\nwant\n%v", written.GetStatus(), own.GetStatus())
	}
	if _, err := a.shoots.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "s-a", PatchType: "application/json-patch+json",
		Patch: &metav1.RawExtension{Raw: []byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"gardener"},{"op":"remove","path":"/metadata/finalizers/0"}]`)}}); err != nil {
		t.Errorf("remove the finalizer: %v", err)
	}

	// Seed b's shoot: none of it.
	theirs, err := admin.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-b"})
	if err != nil {
		t.Fatal(err)
	}
	theirs.Metadata.Finalizers = []string{"gardener"}
	_, err = a.shoots.Update(ctx, theirs)
	wantCode(t, "finalizer on seed b's shoot", err, codes.PermissionDenied)
	_, err = a.shoots.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "s-b", PatchType: "application/merge-patch+json",
		Patch: &metav1.RawExtension{Raw: []byte(`{"metadata":{"finalizers":["gardener"]}}`)}})
	wantCode(t, "finalizer patch on seed b's shoot", err, codes.PermissionDenied)
	theirs.Status = &corev1beta1.ShootStatus{SeedName: proto.String("a")}
	_, err = a.shoots.UpdateStatus(ctx, theirs)
	wantCode(t, "status of seed b's shoot", err, codes.PermissionDenied)

	// ShootStates, named like their shoots.
	state := &corev1beta1.ShootState{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s-a"},
		Spec: &corev1beta1.ShootStateSpec{Gardener: []*corev1beta1.GardenerResourceData{{Name: "ca", Type: "secret", Data: &metav1.RawExtension{Raw: []byte(`{"ca.crt":"x"}`)}}}}}
	st, err := a.states.Create(ctx, state)
	if err != nil {
		t.Fatalf("create the ShootState: %v", err)
	}
	st.Spec.Gardener[0].Name = "ca-rotated"
	if _, err := a.states.Update(ctx, st); err != nil {
		t.Errorf("update the ShootState: %v", err)
	}
	if _, err := a.states.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden-dev", Name: "s-a"}); err != nil {
		t.Errorf("delete the ShootState: %v", err)
	}
	state.Metadata.Name = "s-b"
	_, err = a.states.Create(ctx, state)
	wantCode(t, "create seed b's shoot's ShootState", err, codes.PermissionDenied)
	if _, err := admin.states.Create(ctx, state); err != nil {
		t.Fatal(err)
	}
	_, err = a.states.Update(ctx, state)
	wantCode(t, "update seed b's shoot's ShootState", err, codes.PermissionDenied)
	_, err = a.states.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden-dev", Name: "s-b"})
	wantCode(t, "delete seed b's shoot's ShootState", err, codes.PermissionDenied)

	// The seed's BackupBucket, named after the seed's UID, as the gardenlet names it.
	bucket := func(seed string) *corev1beta1.BackupBucket {
		return &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: uid[seed]}, Spec: &corev1beta1.BackupBucketSpec{
			Provider: &corev1beta1.BackupBucketProvider{Type: "local", Region: "local"}, SeedName: proto.String(seed),
			CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "backup", Namespace: "garden"},
		}}
	}
	b, err := a.buckets.Create(ctx, bucket("a"))
	if err != nil {
		t.Fatalf("create the seed's BackupBucket: %v", err)
	}
	b.Metadata.Finalizers = []string{"gardener"}
	if b, err = a.buckets.Update(ctx, b); err != nil {
		t.Fatalf("update the BackupBucket: %v", err)
	}
	b.Status = &corev1beta1.BackupBucketStatus{LastOperation: &metav1.LastOperation{Type: "Create", State: "Succeeded", Progress: proto.Int32(100), LastUpdateTime: now},
		ObservedGeneration: proto.Int64(1), GeneratedSecretRef: &metav1.SecretReference{Name: "generated-bucket-" + uid["a"], Namespace: "garden"}}
	if _, err := a.buckets.UpdateStatus(ctx, b); err != nil {
		t.Errorf("update the BackupBucket's status: %v", err)
	}
	_, err = a.buckets.Create(ctx, bucket("b"))
	wantCode(t, "create seed b's BackupBucket", err, codes.PermissionDenied)
	theirBucket, err := admin.buckets.Create(ctx, bucket("b"))
	if err != nil {
		t.Fatal(err)
	}
	theirBucket.Metadata.Labels = map[string]string{"x": "y"}
	_, err = a.buckets.Update(ctx, theirBucket)
	wantCode(t, "update seed b's BackupBucket", err, codes.PermissionDenied)
	_, err = a.buckets.UpdateStatus(ctx, theirBucket)
	wantCode(t, "update seed b's BackupBucket's status", err, codes.PermissionDenied)

	// The shoot's BackupEntry: <technicalID>--<shoot UID>, owned by the shoot, in the seed's bucket.
	entryOf := func(shoot *corev1beta1.Shoot, seed string) *corev1beta1.BackupEntry {
		md := shoot.GetMetadata()
		return &corev1beta1.BackupEntry{
			Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "shoot--dev--" + md.GetName() + "--" + md.GetUid(),
				OwnerReferences: []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: md.GetName(), Uid: md.GetUid(),
					Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}}},
			Spec: &corev1beta1.BackupEntrySpec{BucketName: uid[seed], SeedName: proto.String(seed)},
		}
	}
	e, err := a.entries.Create(ctx, entryOf(own, "a"))
	if err != nil {
		t.Fatalf("create the shoot's BackupEntry: %v", err)
	}
	e.Metadata.Annotations = map[string]string{"gardener.cloud/operation": "reconcile"}
	if e, err = a.entries.Update(ctx, e); err != nil {
		t.Fatalf("update the BackupEntry: %v", err)
	}
	e.Status = &corev1beta1.BackupEntryStatus{LastOperation: &metav1.LastOperation{Type: "Create", State: "Succeeded", Progress: proto.Int32(100), LastUpdateTime: now},
		SeedName: proto.String("a"), ObservedGeneration: proto.Int64(1)}
	if _, err := a.entries.UpdateStatus(ctx, e); err != nil {
		t.Errorf("update the BackupEntry's status: %v", err)
	}
	if _, err := a.entries.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden-dev", Name: e.GetMetadata().GetName()}); err != nil {
		t.Errorf("delete the BackupEntry: %v", err)
	}
	_, err = a.entries.Create(ctx, entryOf(theirs, "a"))
	wantCode(t, "create an entry owned by seed b's shoot", err, codes.PermissionDenied, "does not belong to seed")
	_, err = a.entries.Create(ctx, entryOf(theirs, "b"))
	wantCode(t, "create seed b's entry", err, codes.PermissionDenied)
	theirEntry, err := admin.entries.Create(ctx, entryOf(theirs, "b"))
	if err != nil {
		t.Fatal(err)
	}
	theirEntry.Metadata.Labels = map[string]string{"x": "y"}
	_, err = a.entries.Update(ctx, theirEntry)
	wantCode(t, "update seed b's entry", err, codes.PermissionDenied)
	_, err = a.entries.UpdateStatus(ctx, theirEntry)
	wantCode(t, "update seed b's entry's status", err, codes.PermissionDenied)
	_, err = a.entries.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden-dev", Name: theirEntry.GetMetadata().GetName()})
	wantCode(t, "delete seed b's entry", err, codes.PermissionDenied)

	// Bastions: status only.
	for seed, want := range map[string]codes.Code{"a": codes.OK, "b": codes.PermissionDenied} {
		bst, err := admin.bastion.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "bastion-" + seed})
		if err != nil {
			t.Fatal(err)
		}
		bst.Status = &operationsv1alpha1.BastionStatus{ObservedGeneration: proto.Int64(1), LastHeartbeatTimestamp: now,
			Conditions: []*metav1.Condition{{Type: "BastionReady", Status: "True", LastTransitionTime: now, LastUpdateTime: now, Reason: "SuccessfullyReconciled", Message: "m"}}}
		_, err = a.bastion.UpdateStatus(ctx, bst)
		wantCode(t, "status of seed "+seed+"'s Bastion", err, want)
	}

	// Events.
	if _, err := a.events.Create(ctx, &kcorev1.Event{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s-a.1"},
		InvolvedObject: &metav1.ObjectReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Namespace: "garden-dev", Name: "s-a", Uid: own.GetMetadata().GetUid()},
		Reason:         "Reconciling", Message: "Reconciling Shoot cluster state", Type: "Normal", Source: &kcorev1.EventSource{Component: "trellis-agent"},
		FirstTimestamp: now, LastTimestamp: now, Count: proto.Int32(1)}); err != nil {
		t.Errorf("create an event: %v", err)
	}
}

// TestShootMigrationThroughBinding schedules and migrates shoots through the binding subresource over REST and
// gRPC, checks that a plain update may not move a shoot and an agent may not bind, and follows the shoot's
// visibility to the source and the destination agent through the migration.
func TestShootMigrationThroughBinding(t *testing.T) {
	// The test binds with the resourceVersion it read, and schedules itself: neither the shoot-statuslabel controller,
	// the maintenance (a new shoot whose maintenance window is open is maintained at once) nor the scheduler may write
	// the shoot meanwhile.
	h := hubtest.Start(t, hubtest.WithoutControllers("shoot-statuslabel", "shoot-maintenance"), func(c *hub.Config) { c.DisableScheduler = true })
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	garden(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := newAgentAPI(t, h, "a"), newAgentAPI(t, h, "b")
	adminShoots := corev1beta1.NewShootServiceClient(h.GRPC(t))
	const shoot = shootsPath + "/s-a"

	// Source agent a has reconciled the shoot.
	own, err := a.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatal(err)
	}
	own.Status = &corev1beta1.ShootStatus{SeedName: proto.String("a"), LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Succeeded", Progress: proto.Int32(100)}}
	own = updateShootStatus(ctx, t, a.shoots, own)

	// A plain update or patch does not move a shoot; an agent may not bind, not even its own shoot.
	code, body := do(t, h, h.HTTP, h.Token, "PATCH", shoot, `{"spec":{"seedName":"b"}}`)
	if code != 422 || !strings.Contains(string(body), "use the shoots/binding subresource") {
		t.Errorf("plain patch of spec.seedName: want 422 pointing at the binding subresource, got %d %s", code, body)
	}
	moved := proto.Clone(own).(*corev1beta1.Shoot)
	moved.Spec.SeedName = proto.String("b")
	_, err = a.shoots.UpdateBinding(ctx, moved)
	wantCode(t, "agent binds its shoot", err, codes.PermissionDenied, `cannot update resource "shoots/binding"`)
	_, err = a.shoots.Patch(ctx, &metav1.PatchRequest{Namespace: "garden-dev", Name: "s-a", Subresource: "binding", PatchType: "application/merge-patch+json",
		Patch: &metav1.RawExtension{Raw: []byte(`{"spec":{"seedName":"b"}}`)}})
	wantCode(t, "agent patches its shoot's binding", err, codes.PermissionDenied)

	// The binding writes spec.seedName alone: other fields of the request are ignored, the status is kept, the
	// generation moves.
	code, body = do(t, h, h.HTTP, h.Token, "PUT", shoot+"/binding",
		`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"s-a","namespace":"garden-dev","resourceVersion":"`+
			own.GetMetadata().GetResourceVersion()+`","labels":{"ignored":"true"}},"spec":{"seedName":"b","region":"elsewhere"}}`)
	if code != 200 {
		t.Fatalf("PUT binding: %d %s", code, body)
	}
	got, err := adminShoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSpec().GetSeedName() != "b" || got.GetSpec().GetRegion() != "local" || got.GetMetadata().GetLabels()["ignored"] != "" ||
		got.GetStatus().GetSeedName() != "a" || got.GetMetadata().GetGeneration() != own.GetMetadata().GetGeneration()+1 {
		t.Errorf("after the binding: spec.seedName %q (want b), region %q (want local), labels %v, status.seedName %q (want a), generation %d (want %d)",
			got.GetSpec().GetSeedName(), got.GetSpec().GetRegion(), got.GetMetadata().GetLabels(), got.GetStatus().GetSeedName(),
			got.GetMetadata().GetGeneration(), own.GetMetadata().GetGeneration()+1)
	}
	code, body = do(t, h, h.HTTP, h.Token, "PATCH", shoot+"/binding", `{"spec":{"seedName":"b"}}`)
	if code != 422 || !strings.Contains(string(body), "already assigned") {
		t.Errorf("binding to the same seed: want 422, got %d %s", code, body)
	}
	// During the migration the spec is frozen.
	code, body = do(t, h, h.HTTP, h.Token, "PATCH", shoot, `{"spec":{"hibernation":{"enabled":true}}}`)
	if code != 422 || !strings.Contains(string(body), "being migrated") {
		t.Errorf("spec change while migrating: want 422, got %d %s", code, body)
	}

	// Both agents see the shoot: the source migrates it, the destination restores it.
	for _, ag := range []agentAPI{a, b} {
		list, err := ag.shoots.List(ctx, &metav1.ListRequest{Namespace: "garden-dev"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(names(list), "s-a") {
			t.Errorf("agent %s does not see the migrating shoot: %v", ag.seed, names(list))
		}
	}
	// The source finishes the migration and hands the shoot over by clearing status.seedName.
	cur, err := a.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.SeedName = nil
	cur.Status.LastOperation = &metav1.LastOperation{Type: "Migrate", State: "Succeeded", Progress: proto.Int32(100)}
	updateShootStatus(ctx, t, a.shoots, cur)
	// The seed graph follows the write asynchronously: the source loses the shoot once the graph has seen it.
	waitFor(t, "the source is denied the shoot it handed over", func() bool {
		_, err := a.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
		return status.Code(err) == codes.PermissionDenied
	})
	cur, err = b.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatalf("destination reads the shoot: %v", err)
	}
	cur.Status.SeedName = proto.String("b")
	cur.Status.LastOperation = &metav1.LastOperation{Type: "Restore", State: "Succeeded", Progress: proto.Int32(100)}
	updateShootStatus(ctx, t, b.shoots, cur)
	mustAdmin(t, h, 200, "PATCH", shoot, `{"spec":{"hibernation":{"enabled":true}}}`)

	// Scheduling through the binding subresource, over gRPC; the seed must exist.
	mustAdmin(t, h, 201, "POST", shootsPath, shootJSON("s-new", ""))
	unscheduled, err := adminShoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-new"})
	if err != nil {
		t.Fatal(err)
	}
	unscheduled.Spec.SeedName = proto.String("nope")
	_, err = adminShoots.UpdateBinding(ctx, unscheduled)
	wantCode(t, "bind to a seed that does not exist", err, codes.InvalidArgument, "spec.seedName: Not found")
	unscheduled.Spec.SeedName = proto.String("a")
	if bound, err := adminShoots.UpdateBinding(ctx, unscheduled); err != nil || bound.GetSpec().GetSeedName() != "a" {
		t.Errorf("bind an unscheduled shoot: %v", err)
	}
	// A stale resourceVersion is a conflict.
	unscheduled.Spec.SeedName = proto.String("b")
	_, err = adminShoots.UpdateBinding(ctx, unscheduled)
	wantCode(t, "binding with a stale resourceVersion", err, codes.Aborted)

	// Discovery lists the subresource.
	code, body = do(t, h, h.HTTP, h.Token, "GET", "/apis/core.gardener.cloud/v1beta1", "")
	if code != 200 || !strings.Contains(string(body), `"shoots/binding"`) {
		t.Errorf("discovery: want shoots/binding, got %d %s", code, body)
	}
}
