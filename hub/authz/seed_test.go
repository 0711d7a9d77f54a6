package authz_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// graph is a Graph holding seed memberships (true) and references of a seed's objects to objects that do not exist
// (false); the hub's seedgraph is tested on its own.
type graph map[string]bool

func (g graph) Belongs(seed, resource, namespace, name string) bool {
	return g[seed+"|"+resource+"|"+namespace+"|"+name]
}

func (g graph) HasPath(seed, resource, namespace, name string) bool {
	_, ok := g[seed+"|"+resource+"|"+namespace+"|"+name]
	return ok
}

func (g graph) add(seed string, r schema.GroupResource, namespace, name string) {
	g[seed+"|"+r.String()+"|"+namespace+"|"+name] = true
}

// addMissing records that an object of seed references namespace/name of r, which does not exist.
func (g graph) addMissing(seed string, r schema.GroupResource, namespace, name string) {
	g[seed+"|"+r.String()+"|"+namespace+"|"+name] = false
}

var (
	seedA      = auth.User{Name: "gardener.cloud:system:seed:a", Groups: []string{auth.SeedsGroup, auth.GroupAuthned}, Seed: "a"}
	admin      = auth.User{Name: auth.AdminUser, Groups: []string{auth.GroupAdmins, auth.GroupAuthned}}
	bootstrapU = auth.User{Name: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers", auth.GroupAuthned}, BootstrapTokenID: "abcdef"}
)

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "status", "delete"}

// protoPackages maps an API group to the proto package prefix of its kinds.
var protoPackages = map[string]string{
	"core.gardener.cloud":           "trellis.core.",
	"security.gardener.cloud":       "trellis.security.",
	"seedmanagement.gardener.cloud": "trellis.seedmanagement.",
	"operations.gardener.cloud":     "trellis.operations.",
	"":                              "trellis.kubernetes.core.",
	"coordination.k8s.io":           "trellis.kubernetes.coordination.",
	"certificates.k8s.io":           "trellis.kubernetes.certificates.",
	"rbac.authorization.k8s.io":     "trellis.kubernetes.rbac.",
	"auth.trellis.dev":              "trellis.auth.",
}

// newObject returns an empty object of kind k named namespace/name.
func newObject(t *testing.T, k api.Kind, namespace, name string) store.Object {
	t.Helper()
	full := protoreflect.FullName(protoPackages[k.Group] + k.Version + "." + k.Kind)
	mt, err := protoregistry.GlobalTypes.FindMessageByName(full)
	if err != nil {
		t.Fatalf("kind %s/%s %s: %v", k.Group, k.Version, k.Kind, err)
	}
	m := mt.New()
	md := &metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "7"}
	m.Set(m.Descriptor().Fields().ByName("metadata"), protoreflect.ValueOfMessage(md.ProtoReflect()))
	return m.Interface().(store.Object)
}

func csrPEM(t *testing.T, o []string, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{Organization: o, CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// kindCase says how an object of a resource is made a seed's, and what seed a may do with its own object and with
// seed b's.
type kindCase struct {
	// place returns the namespace and name of seed's object; nil: garden-dev (if namespaced) and <resource>-<seed>.
	place func(seed string) (namespace, name string)
	// own makes obj seed's: sets its fields or adds it to the graph; nil: place alone makes it the seed's.
	own          func(t *testing.T, obj store.Object, seed string, g graph)
	mine, theirs string // verbs allowed, space-separated
}

func inGraph(t *testing.T, obj store.Object, seed string, g graph) {
	k := kindOf(t, obj)
	g.add(seed, k.GroupResource(), obj.GetMetadata().GetNamespace(), obj.GetMetadata().GetName())
}

func kindOf(t *testing.T, obj store.Object) api.Kind {
	t.Helper()
	for _, k := range api.Kinds {
		if protoPackages[k.Group]+k.Version+"."+k.Kind == string(obj.ProtoReflect().Descriptor().FullName()) {
			return k
		}
	}
	t.Fatalf("no kind for %s", obj.ProtoReflect().Descriptor().FullName())
	return api.Kind{}
}

const (
	allVerbsAllowed = "get list watch create update patch status delete"
	readOnly        = "get list watch"
)

var kindCases = map[string]kindCase{
	"controllerdeployments.core.gardener.cloud": {own: inGraph, mine: readOnly},
	"backupbuckets.core.gardener.cloud": {own: func(_ *testing.T, obj store.Object, seed string, _ graph) {
		obj.(*corev1beta1.BackupBucket).Spec = &corev1beta1.BackupBucketSpec{SeedName: proto.String(seed)}
	}, mine: allVerbsAllowed},
	"backupentries.core.gardener.cloud": {own: func(_ *testing.T, obj store.Object, seed string, g graph) {
		obj.(*corev1beta1.BackupEntry).Spec = &corev1beta1.BackupEntrySpec{SeedName: proto.String(seed), BucketName: "bucket-" + seed}
		g.add(seed, schema.GroupResource{Group: "core.gardener.cloud", Resource: "backupbuckets"}, "", "bucket-"+seed)
	}, mine: allVerbsAllowed},
	"cloudprofiles.core.gardener.cloud": {own: inGraph, mine: readOnly},
	"controllerinstallations.core.gardener.cloud": {own: func(_ *testing.T, obj store.Object, seed string, _ graph) {
		obj.(*corev1beta1.ControllerInstallation).Spec = &corev1beta1.ControllerInstallationSpec{SeedRef: &metav1.ObjectReference{Name: seed}}
	}, mine: "get list watch update patch status"},
	"controllerregistrations.core.gardener.cloud": {mine: readOnly, theirs: readOnly},
	"exposureclasses.core.gardener.cloud":         {own: inGraph, mine: readOnly},
	"internalsecrets.core.gardener.cloud":         {own: inGraph},
	"namespacedcloudprofiles.core.gardener.cloud": {own: inGraph, mine: readOnly},
	"projects.core.gardener.cloud":                {own: inGraph, mine: readOnly},
	"quotas.core.gardener.cloud":                  {own: inGraph},
	"secretbindings.core.gardener.cloud":          {own: inGraph, mine: readOnly},
	"seeds.core.gardener.cloud": {place: func(seed string) (string, string) { return "", seed },
		mine: "get list watch create update patch status"},
	"shoots.core.gardener.cloud": {own: func(_ *testing.T, obj store.Object, seed string, _ graph) {
		obj.(*corev1beta1.Shoot).Spec = &corev1beta1.ShootSpec{SeedName: proto.String(seed)}
	}, mine: "get list watch update patch status"},
	"shootstates.core.gardener.cloud": {place: func(seed string) (string, string) { return "garden-dev", "shoot-" + seed },
		own: func(_ *testing.T, obj store.Object, seed string, g graph) {
			g.add(seed, schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}, "garden-dev", "shoot-"+seed)
		}, mine: "get list watch create update patch delete"},
	"credentialsbindings.security.gardener.cloud":   {own: inGraph, mine: readOnly},
	"workloadidentities.security.gardener.cloud":    {own: inGraph, mine: readOnly},
	"gardenlets.seedmanagement.gardener.cloud":      {own: inGraph, mine: "get list watch patch status"},
	"managedseeds.seedmanagement.gardener.cloud":    {own: inGraph, mine: "get list watch update patch status"},
	"managedseedsets.seedmanagement.gardener.cloud": {own: inGraph},
	"bastions.operations.gardener.cloud": {own: func(_ *testing.T, obj store.Object, seed string, _ graph) {
		obj.(*operationsv1alpha1.Bastion).Spec = &operationsv1alpha1.BastionSpec{SeedName: proto.String(seed)}
	}, mine: "get list watch create update patch status"},
	"configmaps": {own: inGraph, mine: readOnly},
	"events":     {mine: "create patch", theirs: "create patch"},
	// Users' and robots' identities and the extension roles are nothing of a seed's.
	"serviceaccounts":                        {own: inGraph},
	"clusterroles.rbac.authorization.k8s.io": {own: inGraph},
	"accesstokens.auth.trellis.dev":          {own: inGraph},
	"namespaces":                             {place: func(seed string) (string, string) { return "", "seed-" + seed }, mine: readOnly},
	"secrets": {place: func(seed string) (string, string) { return "seed-" + seed, "backup" },
		mine: "get list watch create update patch delete"},
	"leases.coordination.k8s.io": {place: func(seed string) (string, string) { return "gardener-system-seed-lease", seed },
		mine: "get list watch create update patch"},
	"certificatesigningrequests.certificates.k8s.io": {own: func(t *testing.T, obj store.Object, seed string, _ graph) {
		obj.(*certificatesv1.CertificateSigningRequest).Spec = &certificatesv1.CertificateSigningRequestSpec{
			Username: auth.SeedUserName(seed), Request: csrPEM(t, []string{auth.SeedsGroup}, auth.SeedUserName(seed)),
			SignerName: "kubernetes.io/kube-apiserver-client", Usages: []string{"digital signature", "key encipherment", "client auth"},
		}
	}, mine: "get list watch create"},
}

// allowed asks az whether u may use verb on obj (of kind k), as the kinds' servers ask. A list or watch is allowed
// for obj when it is allowed and its filter passes obj; it is asked for obj's namespace and for all namespaces.
func allowed(t *testing.T, az *authz.Authorizer, u auth.User, k api.Kind, verb string, obj store.Object) bool {
	t.Helper()
	ctx := context.Background()
	md := obj.GetMetadata()
	at := api.Attributes{User: u, Resource: k.GroupResource(), Namespace: md.GetNamespace(), Name: md.GetName()}
	decide := func(at api.Attributes) bool {
		t.Helper()
		err := az.Authorize(ctx, at)
		if err != nil && !apierrors.IsForbidden(err) {
			t.Errorf("%s: want nil or Forbidden, got %v", verb, err)
		}
		return err == nil
	}
	switch verb {
	case "list", "watch":
		at.Verb, at.Name = verb, ""
		results := map[bool]int{}
		for _, ns := range []string{md.GetNamespace(), ""} {
			at.Namespace = ns
			ok := decide(at)
			if ok {
				if f := az.Filter(ctx, at); f != nil {
					ok = f(obj)
				}
			}
			results[ok]++
		}
		if len(results) != 1 {
			t.Errorf("%s in the namespace and in all namespaces disagree", verb)
		}
		return results[true] > 0
	case "get":
		at.Verb, at.Current = api.VerbGet, obj
	case "create":
		at.Verb, at.Object = api.VerbCreate, obj
	case "update":
		at.Verb, at.Object, at.Current = api.VerbUpdate, obj, obj
	case "status":
		at.Verb, at.Subresource, at.Object, at.Current = api.VerbUpdate, "status", obj, obj
		// A status patch is decided alike.
		pt := at
		pt.Verb = api.VerbPatch
		if a, b := decide(at), decide(pt); a != b {
			t.Errorf("status: update %v, patch %v", a, b)
		}
	case "patch":
		// Asked before the patch is applied (no Object) and then on the patched object: the answers agree.
		at.Verb, at.Current = api.VerbPatch, obj
		before := decide(at)
		at.Object = obj
		if after := decide(at); after != before {
			t.Errorf("patch: before applying %v, after %v", before, after)
		}
	case "delete":
		at.Verb, at.Current = api.VerbDelete, obj
	}
	return decide(at)
}

// TestSeedAuthorizerKinds checks, for every kind the hub serves, every verb on an object of seed a and on one of seed
// b, as seed a's agent.
func TestSeedAuthorizerKinds(t *testing.T) {
	for _, k := range api.Kinds {
		t.Run(k.Version+"/"+k.Kind, func(t *testing.T) {
			kc, ok := kindCases[k.GroupResource().String()]
			if !ok {
				t.Fatalf("no case for %s: every kind the hub serves needs one", k.GroupResource())
			}
			g := graph{}
			az := authz.New(authz.Config{Graph: g})
			objectOf := func(seed string) store.Object {
				ns, name := "", k.Resource+"-"+seed
				if k.Namespaced {
					ns = "garden-dev"
				}
				if kc.place != nil {
					ns, name = kc.place(seed)
				}
				obj := newObject(t, k, ns, name)
				if kc.own != nil {
					kc.own(t, obj, seed, g)
				}
				return obj
			}
			mine, theirs := objectOf("a"), objectOf("b")
			for _, tc := range []struct {
				who  string
				obj  store.Object
				want string
			}{{"seed a's", mine, kc.mine}, {"seed b's", theirs, kc.theirs}} {
				want := map[string]bool{}
				for _, v := range strings.Fields(tc.want) {
					want[v] = true
				}
				for _, verb := range allVerbs {
					if got := allowed(t, az, seedA, k, verb, tc.obj); got != want[verb] {
						t.Errorf("%s on %s object %s/%s: want allowed=%v, got %v", verb, tc.who, tc.obj.GetMetadata().GetNamespace(), tc.obj.GetMetadata().GetName(), want[verb], got)
					}
				}
			}
			// Other users: the admin may do everything, a bootstrap token user nothing.
			for _, verb := range allVerbs {
				if !allowed(t, az, admin, k, verb, theirs) {
					t.Errorf("admin: %s denied", verb)
				}
				if allowed(t, az, bootstrapU, k, verb, mine) {
					t.Errorf("bootstrap token user: %s allowed", verb)
				}
			}
		})
	}
}

func attrs(verb string, r schema.GroupResource, namespace, name string) api.Attributes {
	return api.Attributes{User: seedA, Verb: verb, Resource: r, Namespace: namespace, Name: name}
}

var (
	shoots        = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	secrets       = schema.GroupResource{Resource: "secrets"}
	leases        = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	backupEntries = schema.GroupResource{Group: "core.gardener.cloud", Resource: "backupentries"}
	backupBuckets = schema.GroupResource{Group: "core.gardener.cloud", Resource: "backupbuckets"}
	seeds         = schema.GroupResource{Group: "core.gardener.cloud", Resource: "seeds"}
	managedSeeds  = schema.GroupResource{Group: "seedmanagement.gardener.cloud", Resource: "managedseeds"}
	shootStates   = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shootstates"}
	csrs          = schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	configMaps    = schema.GroupResource{Resource: "configmaps"}
	internalSecs  = schema.GroupResource{Group: "core.gardener.cloud", Resource: "internalsecrets"}
)

func managedSeed(name, shoot string) *seedmanagementv1alpha1.ManagedSeed {
	return &seedmanagementv1alpha1.ManagedSeed{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: name},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: shoot}}}
}

func shoot(name, specSeed, statusSeed string) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name}, Spec: &corev1beta1.ShootSpec{}, Status: &corev1beta1.ShootStatus{}}
	if specSeed != "" {
		s.Spec.SeedName = proto.String(specSeed)
	}
	if statusSeed != "" {
		s.Status.SeedName = proto.String(statusSeed)
	}
	return s
}

func TestForbiddenMessage(t *testing.T) {
	az := authz.New(authz.Config{Graph: graph{}})
	at := attrs(api.VerbGet, shoots, "garden-dev", "x")
	at.Current = shoot("x", "b", "b")
	err := az.Authorize(context.Background(), at)
	want := `shoots.core.gardener.cloud "x" is forbidden: User "gardener.cloud:system:seed:a" cannot get resource "shoots" in API group "core.gardener.cloud" in the namespace "garden-dev": object does not belong to seed "a"`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("want Forbidden\n%s\ngot %v", want, err)
	}

	at = attrs(api.VerbUpdate, seeds, "", "b")
	at.Subresource = "status"
	err = az.Authorize(context.Background(), at)
	want = `seeds.core.gardener.cloud "b" is forbidden: User "gardener.cloud:system:seed:a" cannot update resource "seeds/status" in API group "core.gardener.cloud" at the cluster scope: seed agents may update only their own seed's seeds.core.gardener.cloud/status`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("want Forbidden\n%s\ngot %v", want, err)
	}

	err = az.Authorize(context.Background(), attrs(api.VerbList, schema.GroupResource{Group: "core.gardener.cloud", Resource: "quotas"}, "", ""))
	want = `quotas.core.gardener.cloud is forbidden: User "gardener.cloud:system:seed:a" cannot list resource "quotas" in API group "core.gardener.cloud" at the cluster scope: seed agents have no access to quotas.core.gardener.cloud`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("want Forbidden\n%s\ngot %v", want, err)
	}
}

func TestSeedAuthorizerRules(t *testing.T) {
	g := graph{}
	g.add("a", shoots, "garden-dev", "graph-shoot")
	g.add("a", secrets, "garden-dev", "cloud-credentials")
	g.add("b", secrets, "garden-dev", "their-credentials")
	g.add("a", backupBuckets, "", "bucket-a")
	// The generated secret of seed a's bucket, deleted or not created yet; a shoot of seed b's entry, likewise.
	g.addMissing("a", secrets, "garden", "generated-bucket-bucket-a")
	g.addMissing("b", backupEntries, "garden-dev", "shoot--dev--their-shoot--uid")
	reader := objects{}
	reader.add(backupBuckets, &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: "fresh-bucket"}, Spec: &corev1beta1.BackupBucketSpec{SeedName: proto.String("a")}})
	reader.add(shoots, shoot("fresh-shoot", "a", ""))
	reader.add(shoots, shoot("their-shoot", "b", ""))
	// ManagedSeeds: ms-a's shoot is on seed a, which hosts it; ms-b's is not.
	g.add("a", shoots, "garden", "host-shoot")
	reader.add(managedSeeds, managedSeed("ms-a", "host-shoot"))
	reader.add(managedSeeds, managedSeed("ms-b", "their-host-shoot"))
	reader.add(managedSeeds, managedSeed("a", "host-shoot")) // a ManagedSeed is never its own host
	az := authz.New(authz.Config{Graph: g, Reader: reader})
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		at    api.Attributes
		allow bool
	}{
		// Whether or not an object exists, a denial is Forbidden; the seed's own objects by name are allowed, so a
		// missing one is NotFound.
		{"get missing shoot", attrs(api.VerbGet, shoots, "garden-dev", "missing"), false},
		{"get missing secret in seed-a", attrs(api.VerbGet, secrets, "seed-a", "missing"), true},
		{"get missing secret in seed-b", attrs(api.VerbGet, secrets, "seed-b", "missing"), false},
		{"update missing own lease", withObj(attrs(api.VerbUpdate, leases, "gardener-system-seed-lease", "a"), nil, nil), true},
		{"update other seed's lease", attrs(api.VerbUpdate, leases, "gardener-system-seed-lease", "b"), false},
		{"create lease elsewhere", withObj(attrs(api.VerbCreate, leases, "seed-a", "a"), meta(&kcorev1.Secret{}, "seed-a", "a"), nil), false},
		{"get shoot via graph", attrs(api.VerbGet, shoots, "garden-dev", "graph-shoot"), true},
		{"get shoot the graph has not seen yet (reader)", attrs(api.VerbGet, shoots, "garden-dev", "fresh-shoot"), true},
		{"get other seed's shoot the reader has", attrs(api.VerbGet, shoots, "garden-dev", "their-shoot"), false},
		// A migrating shoot (spec on b, status still on a) belongs to both seeds.
		{"status of a shoot migrating away", withObj(attrs(api.VerbUpdate, shoots, "garden-dev", "m"), shoot("m", "b", "a"), shoot("m", "b", "a")), true},
		{"status of a shoot migrating here", withObj(attrs(api.VerbUpdate, shoots, "garden-dev", "m"), shoot("m", "a", "b"), shoot("m", "a", "b")), true},
		{"delete own shoot", withObj(attrs(api.VerbDelete, shoots, "garden-dev", "s"), nil, shoot("s", "a", "a")), false},
		{"create shoot", withObj(attrs(api.VerbCreate, shoots, "garden-dev", "s"), shoot("s", "a", ""), nil), false},
		{"unknown subresource", withSub(attrs(api.VerbUpdate, shoots, "garden-dev", "graph-shoot"), "scale"), false},
		// Gardener's binding subresource schedules and migrates shoots: not for agents, not even for their own shoots.
		{"update binding of own shoot", withSub(withObj(attrs(api.VerbUpdate, shoots, "garden-dev", "s"), shoot("s", "b", "a"), shoot("s", "a", "a")), "binding"), false},
		{"patch binding of own shoot", withSub(withObj(attrs(api.VerbPatch, shoots, "garden-dev", "s"), nil, shoot("s", "a", "a")), "binding"), false},
		// The finalizer "gardener" goes on and off with updates and patches of the shoot itself.
		{"update own shoot (finalizer)", withObj(attrs(api.VerbUpdate, shoots, "garden-dev", "s"), finalized(shoot("s", "a", "a")), shoot("s", "a", "a")), true},
		{"patch own shoot (finalizer)", withObj(attrs(api.VerbPatch, shoots, "garden-dev", "s"), shoot("s", "a", "a"), finalized(shoot("s", "a", "a"))), true},
		{"patch other seed's shoot (finalizer)", withObj(attrs(api.VerbPatch, shoots, "garden-dev", "s"), finalized(shoot("s", "b", "b")), shoot("s", "b", "b")), false},
		// Secrets referenced by the seed's shoots.
		{"get referenced secret", attrs(api.VerbGet, secrets, "garden-dev", "cloud-credentials"), true},
		{"update referenced secret", attrs(api.VerbUpdate, secrets, "garden-dev", "cloud-credentials"), true},
		{"delete referenced secret", attrs(api.VerbDelete, secrets, "garden-dev", "cloud-credentials"), true},
		{"get other seed's secret", attrs(api.VerbGet, secrets, "garden-dev", "their-credentials"), false},
		{"create secret in garden-dev", withObj(attrs(api.VerbCreate, secrets, "garden-dev", "x"), meta(&kcorev1.Secret{}, "garden-dev", "x"), nil), false},
		{"create secret owned by own shoot", withObj(attrs(api.VerbCreate, secrets, "garden-dev", "graph-shoot.ca-cluster"),
			owned(meta(&kcorev1.Secret{}, "garden-dev", "graph-shoot.ca-cluster"), "core.gardener.cloud/v1beta1", "Shoot", "graph-shoot"), nil), true},
		{"create secret owned by other seed's shoot", withObj(attrs(api.VerbCreate, secrets, "garden-dev", "their-shoot.ca-cluster"),
			owned(meta(&kcorev1.Secret{}, "garden-dev", "their-shoot.ca-cluster"), "core.gardener.cloud/v1beta1", "Shoot", "their-shoot"), nil), false},
		{"create secret owned by own bucket", withObj(attrs(api.VerbCreate, secrets, "garden", "generated-bucket-bucket-a"),
			owned(meta(&kcorev1.Secret{}, "garden", "generated-bucket-bucket-a"), "core.gardener.cloud/v1beta1", "BackupBucket", "bucket-a"), nil), true},
		// What the agent publishes for its shoots in their project namespaces: <shoot>.ca-cluster and
		// <shoot>.ssh-keypair(.old), owned by the shoot; it keeps them up to date and deletes them with the shoot.
		{"update secret owned by own shoot", withObj(attrs(api.VerbUpdate, secrets, "garden-dev", "graph-shoot.ssh-keypair"),
			ownedBy(meta(&kcorev1.Secret{}, "garden-dev", "graph-shoot.ssh-keypair"), "graph-shoot"), ownedBy(meta(&kcorev1.Secret{}, "garden-dev", "graph-shoot.ssh-keypair"), "graph-shoot")), true},
		{"delete secret owned by own shoot", withObj(attrs(api.VerbDelete, secrets, "garden-dev", "graph-shoot.ssh-keypair.old"),
			nil, ownedBy(meta(&kcorev1.Secret{}, "garden-dev", "graph-shoot.ssh-keypair.old"), "graph-shoot")), true},
		{"delete secret owned by other seed's shoot", withObj(attrs(api.VerbDelete, secrets, "garden-dev", "their-shoot.ssh-keypair"),
			nil, ownedBy(meta(&kcorev1.Secret{}, "garden-dev", "their-shoot.ssh-keypair"), "their-shoot")), false},
		// Gardener's graph knows them by name: deleting one that is gone reaches the store (NotFound); a missing
		// object of another seed's shoot, or not named like a published one, stays Forbidden.
		{"delete missing ca-cluster config map of own shoot", attrs(api.VerbDelete, configMaps, "garden-dev", "graph-shoot.ca-cluster"), true},
		{"delete missing ssh-keypair.old of own shoot", attrs(api.VerbDelete, secrets, "garden-dev", "graph-shoot.ssh-keypair.old"), true},
		{"delete missing ssh-keypair of other seed's shoot", attrs(api.VerbDelete, secrets, "garden-dev", "their-shoot.ssh-keypair"), false},
		{"delete missing secret of own shoot, other name", attrs(api.VerbDelete, secrets, "garden-dev", "graph-shoot.kubeconfig"), false},
		{"create config map owned by own shoot", withObj(attrs(api.VerbCreate, configMaps, "garden-dev", "graph-shoot.ca-cluster"),
			ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "graph-shoot.ca-cluster"), "graph-shoot"), nil), true},
		{"create config map owned by other seed's shoot", withObj(attrs(api.VerbCreate, configMaps, "garden-dev", "their-shoot.ca-cluster"),
			ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "their-shoot.ca-cluster"), "their-shoot"), nil), false},
		{"create config map owned by nothing", withObj(attrs(api.VerbCreate, configMaps, "garden-dev", "x"), meta(&kcorev1.ConfigMap{}, "garden-dev", "x"), nil), false},
		{"create config map owned by own shoot's project", withObj(attrs(api.VerbCreate, configMaps, "garden-dev", "graph-shoot.ca-cluster"),
			owned(meta(&kcorev1.ConfigMap{}, "garden-dev", "graph-shoot.ca-cluster"), "core.gardener.cloud/v1beta1", "Project", "graph-shoot"), nil), false},
		{"update config map owned by own shoot", withObj(attrs(api.VerbUpdate, configMaps, "garden-dev", "graph-shoot.ca-cluster"),
			ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "graph-shoot.ca-cluster"), "graph-shoot"), ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "graph-shoot.ca-cluster"), "graph-shoot")), true},
		{"delete config map owned by own shoot", withObj(attrs(api.VerbDelete, configMaps, "garden-dev", "graph-shoot.ca-cluster"),
			nil, ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "graph-shoot.ca-cluster"), "graph-shoot")), true},
		{"update config map owned by other seed's shoot", withObj(attrs(api.VerbUpdate, configMaps, "garden-dev", "their-shoot.ca-cluster"),
			ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "their-shoot.ca-cluster"), "their-shoot"), ownedBy(meta(&kcorev1.ConfigMap{}, "garden-dev", "their-shoot.ca-cluster"), "their-shoot")), false},
		// The client CA of a shoot (<shoot>.ca-client, an InternalSecret owned by the shoot) is the agent's to write and
		// read back; no other InternalSecret, and not another seed's shoot's, nor a list of them.
		{"create client CA of own shoot", withObj(attrs(api.VerbCreate, internalSecs, "garden-dev", "graph-shoot.ca-client"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "graph-shoot"), nil), true},
		{"create client CA of other seed's shoot", withObj(attrs(api.VerbCreate, internalSecs, "garden-dev", "their-shoot.ca-client"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "their-shoot.ca-client"), "their-shoot"), nil), false},
		{"create other internal secret owned by own shoot", withObj(attrs(api.VerbCreate, internalSecs, "garden-dev", "graph-shoot.ca-cluster"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-cluster"), "graph-shoot"), nil), false},
		{"create client CA named for another shoot", withObj(attrs(api.VerbCreate, internalSecs, "garden-dev", "their-shoot.ca-client"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "their-shoot.ca-client"), "graph-shoot"), nil), false},
		{"get client CA of own shoot", withObj(attrs(api.VerbGet, internalSecs, "garden-dev", "graph-shoot.ca-client"),
			nil, ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "graph-shoot")), true},
		{"update client CA of own shoot", withObj(attrs(api.VerbUpdate, internalSecs, "garden-dev", "graph-shoot.ca-client"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "graph-shoot"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "graph-shoot")), true},
		{"update client CA of own shoot to another owner", withObj(attrs(api.VerbUpdate, internalSecs, "garden-dev", "graph-shoot.ca-client"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "their-shoot"),
			ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "graph-shoot")), false},
		{"delete client CA of own shoot", withObj(attrs(api.VerbDelete, internalSecs, "garden-dev", "graph-shoot.ca-client"),
			nil, ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "graph-shoot.ca-client"), "graph-shoot")), true},
		{"delete client CA of other seed's shoot", withObj(attrs(api.VerbDelete, internalSecs, "garden-dev", "their-shoot.ca-client"),
			nil, ownedBy(meta(&corev1beta1.InternalSecret{}, "garden-dev", "their-shoot.ca-client"), "their-shoot")), false},
		{"delete missing client CA of own shoot", attrs(api.VerbDelete, internalSecs, "garden-dev", "graph-shoot.ca-client"), true},
		{"get other internal secret", withObj(attrs(api.VerbGet, internalSecs, "garden-dev", "x"), nil, meta(&corev1beta1.InternalSecret{}, "garden-dev", "x")), false},
		{"list internal secrets", attrs(api.VerbList, internalSecs, "garden-dev", ""), false},
		{"create bootstrap token", withObj(attrs(api.VerbCreate, secrets, "kube-system", "bootstrap-token-abcdef"), bootstrapToken(t, "a"), nil), false},
		{"delete own bootstrap token", withObj(attrs(api.VerbDelete, secrets, "kube-system", "x"), nil, bootstrapToken(t, "a")), true},
		{"delete other seed's bootstrap token", withObj(attrs(api.VerbDelete, secrets, "kube-system", "x"), nil, bootstrapToken(t, "b")), false},
		{"get own bootstrap token", withObj(attrs(api.VerbGet, secrets, "kube-system", "x"), nil, bootstrapToken(t, "a")), false},
		// The hosting seed's agent deploys a ManagedSeed's agent: a bootstrap token for it, its Seed read and deleted.
		{"create bootstrap token of hosted managed seed", withObj(attrs(api.VerbCreate, secrets, "kube-system", "bootstrap-token-abcdef"), bootstrapToken(t, "ms-a"), nil), true},
		{"create bootstrap token of other managed seed", withObj(attrs(api.VerbCreate, secrets, "kube-system", "bootstrap-token-abcdef"), bootstrapToken(t, "ms-b"), nil), false},
		{"create bootstrap token of a seed without ManagedSeed", withObj(attrs(api.VerbCreate, secrets, "kube-system", "bootstrap-token-abcdef"), bootstrapToken(t, "c"), nil), false},
		{"create bootstrap token of hosted managed seed elsewhere", withObj(attrs(api.VerbCreate, secrets, "garden", "bootstrap-token-abcdef"),
			func() *kcorev1.Secret { s := bootstrapToken(t, "ms-a"); s.Metadata.Namespace = "garden"; return s }(), nil), false},
		{"delete bootstrap token of hosted managed seed", withObj(attrs(api.VerbDelete, secrets, "kube-system", "x"), nil, bootstrapToken(t, "ms-a")), true},
		{"delete missing bootstrap token", attrs(api.VerbDelete, secrets, "kube-system", "bootstrap-token-abcdef"), true},
		{"delete missing other kube-system secret", attrs(api.VerbDelete, secrets, "kube-system", "x"), false},
		{"delete bootstrap token of other managed seed", withObj(attrs(api.VerbDelete, secrets, "kube-system", "x"), nil, bootstrapToken(t, "ms-b")), false},
		{"get seed of hosted managed seed", attrs(api.VerbGet, seeds, "", "ms-a"), true},
		{"get seed of other managed seed", attrs(api.VerbGet, seeds, "", "ms-b"), false},
		{"delete seed of hosted managed seed", withObj(attrs(api.VerbDelete, seeds, "", "ms-a"), nil, meta(&corev1beta1.Seed{}, "", "ms-a")), true},
		{"delete seed of other managed seed", withObj(attrs(api.VerbDelete, seeds, "", "ms-b"), nil, meta(&corev1beta1.Seed{}, "", "ms-b")), false},
		{"delete own seed registered by a ManagedSeed", withObj(attrs(api.VerbDelete, seeds, "", "a"), nil, meta(&corev1beta1.Seed{}, "", "a")), false},
		{"update seed of hosted managed seed", withObj(attrs(api.VerbUpdate, seeds, "", "ms-a"), meta(&corev1beta1.Seed{}, "", "ms-a"), meta(&corev1beta1.Seed{}, "", "ms-a")), false},
		{"create seed of hosted managed seed", withObj(attrs(api.VerbCreate, seeds, "", "ms-a"), meta(&corev1beta1.Seed{}, "", "ms-a"), nil), false},
		// Creates are checked on the new object.
		{"create own seed", withObj(attrs(api.VerbCreate, seeds, "", "a"), meta(&corev1beta1.Seed{}, "", "a"), nil), true},
		{"create other seed", withObj(attrs(api.VerbCreate, seeds, "", "b"), meta(&corev1beta1.Seed{}, "", "b"), nil), false},
		{"delete own seed", withObj(attrs(api.VerbDelete, seeds, "", "a"), nil, meta(&corev1beta1.Seed{}, "", "a")), false},
		{"create bucket of other seed", withObj(attrs(api.VerbCreate, backupBuckets, "", "x"), &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: "x"}, Spec: &corev1beta1.BackupBucketSpec{SeedName: proto.String("b")}}, nil), false},
		{"create bucket without seed", withObj(attrs(api.VerbCreate, backupBuckets, "", "x"), &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: "x"}}, nil), false},
		{"create entry in own bucket", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "e"), entry("e", "a", "bucket-a"), nil), true},
		{"create entry in a bucket the graph has not seen yet (reader)", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "e"), entry("e", "a", "fresh-bucket"), nil), true},
		{"create entry in other seed's bucket", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "e"), entry("e", "a", "bucket-b"), nil), false},
		{"create restore's source entry", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "source-e"), entry("source-e", "a", "bucket-b"), nil), true},
		{"create entry for other seed", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "e"), entry("e", "b", "bucket-a"), nil), false},
		// Gardener's entry of a shoot: <technicalID>--<shoot UID>, owned by the shoot.
		{"create entry owned by own shoot", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "shoot--dev--s--uid"),
			ownedEntry(entry("shoot--dev--s--uid", "a", "bucket-a"), "graph-shoot"), nil), true},
		{"create entry owned by other seed's shoot", withObj(attrs(api.VerbCreate, backupEntries, "garden-dev", "shoot--dev--s--uid"),
			ownedEntry(entry("shoot--dev--s--uid", "a", "bucket-a"), "their-shoot"), nil), false},
		// A migration's destination takes over the entry the source wrote, through the entry's shoot.
		{"update entry of a shoot migrating here", withObj(attrs(api.VerbUpdate, backupEntries, "garden-dev", "e"),
			ownedEntry(entry("e", "a", "bucket-a"), "fresh-shoot"), ownedEntry(entry("e", "b", "bucket-b"), "fresh-shoot")), true},
		{"update status of an entry of a shoot migrating here", withSub(withObj(attrs(api.VerbUpdate, backupEntries, "garden-dev", "e"),
			nil, ownedEntry(entry("e", "b", "bucket-b"), "graph-shoot")), "status"), true},
		{"update entry of other seed's shoot", withObj(attrs(api.VerbUpdate, backupEntries, "garden-dev", "e"),
			nil, ownedEntry(entry("e", "b", "bucket-b"), "their-shoot")), false},
		{"delete entry of other seed's shoot", withObj(attrs(api.VerbDelete, backupEntries, "garden-dev", "e"),
			nil, ownedEntry(entry("e", "b", "bucket-b"), "their-shoot")), false},
		{"create bastion for other seed", withObj(attrs(api.VerbCreate, schema.GroupResource{Group: "operations.gardener.cloud", Resource: "bastions"}, "garden-dev", "x"),
			&operationsv1alpha1.Bastion{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "x"}, Spec: &operationsv1alpha1.BastionSpec{SeedName: proto.String("b")}}, nil), false},
		{"create shoot state of own shoot", withObj(attrs(api.VerbCreate, shootStates, "garden-dev", "graph-shoot"), meta(&corev1beta1.ShootState{}, "garden-dev", "graph-shoot"), nil), true},
		{"create shoot state of fresh own shoot (reader)", withObj(attrs(api.VerbCreate, shootStates, "garden-dev", "fresh-shoot"), meta(&corev1beta1.ShootState{}, "garden-dev", "fresh-shoot"), nil), true},
		{"create shoot state of other seed's shoot", withObj(attrs(api.VerbCreate, shootStates, "garden-dev", "their-shoot"), meta(&corev1beta1.ShootState{}, "garden-dev", "their-shoot"), nil), false},
		{"get shoot state of other seed's shoot", attrs(api.VerbGet, shootStates, "garden-dev", "their-shoot"), false},
		{"create CSR for other seed", withObj(attrs(api.VerbCreate, csrs, "", "c"), csr(t, auth.SeedUserName("a"), []string{auth.SeedsGroup}, auth.SeedUserName("b")), nil), false},
		{"create CSR with extra O", withObj(attrs(api.VerbCreate, csrs, "", "c"), csr(t, auth.SeedUserName("a"), []string{auth.SeedsGroup, "system:masters"}, auth.SeedUserName("a")), nil), false},
		{"create CSR naming another requester", withObj(attrs(api.VerbCreate, csrs, "", "c"), csr(t, auth.SeedUserName("b"), []string{auth.SeedsGroup}, auth.SeedUserName("a")), nil), false},
		{"create CSR with garbage", withObj(attrs(api.VerbCreate, csrs, "", "c"), &certificatesv1.CertificateSigningRequest{Metadata: &metav1.ObjectMeta{Name: "c"}, Spec: &certificatesv1.CertificateSigningRequestSpec{Username: auth.SeedUserName("a"), Request: []byte("nope")}}, nil), false},
		{"update own CSR", withObj(attrs(api.VerbUpdate, csrs, "", "c"), nil, csr(t, auth.SeedUserName("a"), []string{auth.SeedsGroup}, auth.SeedUserName("a"))), false},
		// A get is decided by the graph's paths: an object seed a's objects reference may be read whether or not it
		// exists (a missing one is NotFound); nothing else about missing objects is told, and writes need the object.
		{"get missing secret own bucket references", attrs(api.VerbGet, secrets, "garden", "generated-bucket-bucket-a"), true},
		{"get missing entry other seed's shoot references", attrs(api.VerbGet, backupEntries, "garden-dev", "shoot--dev--their-shoot--uid"), false},
		{"get missing unreferenced secret", attrs(api.VerbGet, secrets, "garden", "generated-bucket-bucket-b"), false},
		{"update missing secret own bucket references", attrs(api.VerbUpdate, secrets, "garden", "generated-bucket-bucket-a"), false},
		{"patch missing secret own bucket references", attrs(api.VerbPatch, secrets, "garden", "generated-bucket-bucket-a"), false},
		{"delete missing secret own bucket references", attrs(api.VerbDelete, secrets, "garden", "generated-bucket-bucket-a"), false},
		// Public configuration.
		{"get gardener-info", attrs(api.VerbGet, configMaps, "gardener-system-public", "gardener-info"), true},
		{"update gardener-info", attrs(api.VerbUpdate, configMaps, "gardener-system-public", "gardener-info"), false},
		{"get a config map elsewhere", attrs(api.VerbGet, configMaps, "kube-system", "cluster-info"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := az.Authorize(ctx, tc.at)
			if tc.allow && err != nil {
				t.Errorf("want allowed, got %v", err)
			}
			if !tc.allow && !apierrors.IsForbidden(err) {
				t.Errorf("want Forbidden, got %v", err)
			}
		})
	}

	t.Run("list filter", func(t *testing.T) {
		at := attrs(api.VerbList, shoots, "", "")
		if err := az.Authorize(ctx, at); err != nil {
			t.Fatal(err)
		}
		f := az.Filter(ctx, at)
		for obj, want := range map[*corev1beta1.Shoot]bool{
			shoot("on-a", "a", ""):       true,
			shoot("status-a", "", "a"):   true,
			shoot("graph-shoot", "", ""): true,
			shoot("on-b", "b", "b"):      false,
			shoot("unscheduled", "", ""): false,
		} {
			if got := f(obj); got != want {
				t.Errorf("%s: want visible=%v, got %v", obj.GetMetadata().GetName(), want, got)
			}
		}
		if f := az.Filter(ctx, api.Attributes{User: admin, Verb: api.VerbList, Resource: shoots}); f != nil {
			t.Error("admin lists are filtered")
		}
	})

	t.Run("graph not ready", func(t *testing.T) {
		ready := make(chan struct{})
		az := authz.New(authz.Config{Graph: g, GraphReady: ready})
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := az.Authorize(ctx, attrs(api.VerbGet, shoots, "garden-dev", "graph-shoot")); !apierrors.IsForbidden(err) {
			t.Errorf("before the graph is ready and the request ends: want Forbidden, got %v", err)
		}
		if err := az.Authorize(ctx, attrs(api.VerbGet, secrets, "seed-a", "x")); err != nil {
			t.Errorf("what needs no graph is decided at once: %v", err)
		}
		close(ready)
		if err := az.Authorize(context.Background(), attrs(api.VerbGet, shoots, "garden-dev", "graph-shoot")); err != nil {
			t.Errorf("once ready: %v", err)
		}
	})
}

func TestRestrictBootstrap(t *testing.T) {
	if err := authz.RestrictBootstrap(bootstrapU, "/trellis.agent.v1.AgentService/Connect"); err != nil {
		t.Errorf("Connect: %v", err)
	}
	for _, req := range []string{"/trellis.core.v1beta1.ShootService/List", "GET /apis/core.gardener.cloud/v1beta1/shoots", "/trellis.agent.v1.AgentService/Other"} {
		err := authz.RestrictBootstrap(bootstrapU, req)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "system:bootstrap:abcdef" cannot `+req) {
			t.Errorf("%s: want Forbidden naming the user and request, got %v", req, err)
		}
	}
	for _, u := range []auth.User{admin, seedA} {
		if err := authz.RestrictBootstrap(u, "/trellis.core.v1beta1.ShootService/List"); err != nil {
			t.Errorf("%s: %v", u.Name, err)
		}
	}
}

func TestAuthorizePath(t *testing.T) {
	for _, tc := range []struct {
		u         auth.User
		path      string
		discovery bool
		allow     bool
	}{
		{admin, "/metrics", false, true},
		{admin, "/apis", true, true},
		{seedA, "/apis", true, true},
		{seedA, "/metrics", false, false},
		{seedA, "/debug/pprof/", false, false},
		{bootstrapU, "/apis", true, false},
		{bootstrapU, "/metrics", false, false},
		{auth.User{Name: "alice", Groups: []string{auth.GroupAuthned}}, "/apis", true, true},
		{auth.User{Name: "alice", Groups: []string{auth.GroupAuthned}}, "/metrics", false, false},
		{auth.User{Name: "alice", Groups: []string{auth.GroupAuthned}}, "/debug/pprof/", false, false},
	} {
		err := authz.AuthorizePath(tc.u, "get", tc.path, tc.discovery)
		if tc.allow != (err == nil) || (err != nil && !apierrors.IsForbidden(err)) {
			t.Errorf("%s %s: want allowed=%v, got %v", tc.u.Name, tc.path, tc.allow, err)
		}
	}
}

// objects is a Reader over a few objects, standing in for the hub's watch cache.
type objects map[string]store.Object

func (o objects) add(r schema.GroupResource, obj store.Object) {
	o[r.String()+"|"+obj.GetMetadata().GetNamespace()+"|"+obj.GetMetadata().GetName()] = obj
}

func (o objects) Get(_ context.Context, r schema.GroupResource, namespace, name string) (store.Object, error) {
	if obj, ok := o[r.String()+"|"+namespace+"|"+name]; ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(r, name)
}

func withObj(at api.Attributes, obj, cur store.Object) api.Attributes {
	at.Object, at.Current = obj, cur
	return at
}

func withSub(at api.Attributes, sub string) api.Attributes {
	at.Subresource = sub
	return at
}

func meta[T interface {
	store.Object
	ProtoReflect() protoreflect.Message
}](obj T, namespace, name string) T {
	m := obj.ProtoReflect()
	md := &metav1.ObjectMeta{Namespace: namespace, Name: name}
	m.Set(m.Descriptor().Fields().ByName("metadata"), protoreflect.ValueOfMessage(md.ProtoReflect()))
	return obj
}

func owned[T store.Object](obj T, apiVersion, kind, name string) T {
	md := obj.GetMetadata()
	md.OwnerReferences = append(md.OwnerReferences, &metav1.OwnerReference{ApiVersion: apiVersion, Kind: kind, Name: name})
	return obj
}

// ownedBy makes obj owned by shoot name in its namespace, as the agent's published objects are.
func ownedBy[T store.Object](obj T, shoot string) T {
	return owned(obj, "core.gardener.cloud/v1beta1", "Shoot", shoot)
}

func entry(name, seed, bucket string) *corev1beta1.BackupEntry {
	return &corev1beta1.BackupEntry{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name}, Spec: &corev1beta1.BackupEntrySpec{SeedName: proto.String(seed), BucketName: bucket}}
}

func ownedEntry(e *corev1beta1.BackupEntry, shoot string) *corev1beta1.BackupEntry {
	e.Metadata.OwnerReferences = []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: shoot, Controller: proto.Bool(true)}}
	return e
}

func finalized(s *corev1beta1.Shoot) *corev1beta1.Shoot {
	s.Metadata.Finalizers = []string{"gardener"}
	return s
}

func bootstrapToken(t *testing.T, seed string) *kcorev1.Secret {
	tok, err := auth.NewSeedBootstrapToken(seed, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return tok.SecretObject()
}

func csr(t *testing.T, username string, o []string, cn string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{Metadata: &metav1.ObjectMeta{Name: "c"}, Spec: &certificatesv1.CertificateSigningRequestSpec{
		Username: username, Request: csrPEM(t, o, cn), Usages: []string{"digital signature", "key encipherment", "client auth"},
	}}
}
