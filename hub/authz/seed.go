package authz

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/seedgraph"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
	"github.com/trellis-dev/trellis/proto/objectnames"
)

// Namespaces the seed rules name, as Gardener does.
const (
	// PublicNamespace holds configuration every client may read (gardener-info, kube-root-ca.crt).
	PublicNamespace = "gardener-system-public"
	// ClusterIdentityNamespace and ClusterIdentityName locate the ConfigMap holding the garden's cluster identity
	// (key cluster-identity), as in Gardener; every agent may read it: its extensions get it injected.
	ClusterIdentityNamespace, ClusterIdentityName = "kube-system", "cluster-identity"
)

// scope says which objects of a resource an agent may use a verb on.
type scope int

const (
	none    scope = iota
	own           // only the seed's own object, by name (its Seed, its Lease)
	belongs       // objects that belong to the seed
	all           // every object
	stated        // objects that say themselves they are the seed's (policy.direct), not those it refers to
)

// policy is what an agent may do with one resource: Gardener's SeedAuthorizer (reads, updates, deletes) and
// SeedRestriction (creates).
type policy struct {
	read, update, patch, status, delete scope
	// create decides a create on the new object: "" allows it, anything else is the reason it is denied. nil
	// denies every create.
	create func(c *seedRequest, obj store.Object) string
	// self reports whether an object belongs to the seed by its namespace and name alone (so even before it exists).
	self func(seed, namespace, name string) bool
	// direct reports whether an object belongs to the seed by what it says (spec.seedName, ...).
	direct func(c *seedRequest, obj store.Object) bool
	// via reports whether an object belongs to the seed through another object (a ShootState through its shoot).
	via func(c *seedRequest, namespace, name string) bool
	// deleteAlso allows deleting some objects that do not belong (the seed's own bootstrap token).
	deleteAlso func(c *seedRequest, cur store.Object) bool
}

var (
	seedsResource                   = gr("core.gardener.cloud", "seeds")
	shootsResource                  = gr("core.gardener.cloud", "shoots")
	backupBucketsResource           = gr("core.gardener.cloud", "backupbuckets")
	backupEntriesResource           = gr("core.gardener.cloud", "backupentries")
	controllerInstallationsResource = gr("core.gardener.cloud", "controllerinstallations")
	shootStatesResource             = gr("core.gardener.cloud", "shootstates")
	leasesResource                  = gr("coordination.k8s.io", "leases")
	secretsResource                 = gr("", "secrets")
	internalSecretsResource         = gr("core.gardener.cloud", "internalsecrets")
	managedSeedsResource            = gr("seedmanagement.gardener.cloud", "managedseeds")
)

func gr(group, resource string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}

// readOnly is the policy of what an agent may read when it belongs to its seed.
var readOnly = policy{read: belongs}

// policies holds the seed rules. A resource that is not here (Quotas, ManagedSeedSets) is denied to
// agents altogether; of InternalSecrets, an agent may use only the client CAs of its shoots (<shoot>.ca-client). (Set in init: some rules look up other resources' policies.)
var policies map[schema.GroupResource]policy

func init() { policies = seedPolicies() }

func seedPolicies() map[schema.GroupResource]policy {
	return map[schema.GroupResource]policy{
		seedsResource: {
			read: belongs, update: own, patch: own, status: own,
			self:   func(seed, _, name string) bool { return name == seed },
			create: createOwnSeed,
			// The Seed a ManagedSeed of this seed registers: the agent waits for it to be ready and deletes it with
			// the ManagedSeed (gardenlet's managedseed controller).
			via:        func(c *seedRequest, _, name string) bool { return c.hostsManagedSeed(name) },
			deleteAlso: func(c *seedRequest, cur store.Object) bool { return c.hostsManagedSeed(cur.GetMetadata().GetName()) },
		},
		shootsResource: {
			read: belongs, update: belongs, patch: belongs, status: belongs,
			direct: func(c *seedRequest, obj store.Object) bool {
				s, ok := obj.(*corev1beta1.Shoot)
				return ok && (s.GetSpec().GetSeedName() == c.seed || s.GetStatus().GetSeedName() == c.seed)
			},
		},
		backupBucketsResource: {
			read: belongs, update: belongs, patch: belongs, status: belongs, delete: belongs,
			direct: func(c *seedRequest, obj store.Object) bool {
				b, ok := obj.(*corev1beta1.BackupBucket)
				return ok && b.GetSpec().GetSeedName() == c.seed
			},
			create: createBackupBucket,
		},
		backupEntriesResource: {
			read: belongs, update: belongs, patch: belongs, status: belongs, delete: belongs,
			direct: func(c *seedRequest, obj store.Object) bool {
				e, ok := obj.(*corev1beta1.BackupEntry)
				if !ok {
					return false
				}
				if e.GetSpec().GetSeedName() == c.seed || e.GetStatus().GetSeedName() == c.seed {
					return true
				}
				// The entry of a shoot migrating here (the graph says so too, once it has seen the entry).
				shoot := seedgraph.OwnerShoot(e.GetMetadata())
				return shoot != "" && c.belongsTo(shootsResource, e.GetMetadata().GetNamespace(), shoot)
			},
			create: createBackupEntry,
		},
		gr("operations.gardener.cloud", "bastions"): {
			read: belongs, update: belongs, patch: belongs, status: belongs,
			direct: func(c *seedRequest, obj store.Object) bool {
				b, ok := obj.(*operationsv1alpha1.Bastion)
				return ok && b.GetSpec().GetSeedName() == c.seed
			},
			create: createBastion,
		},
		controllerInstallationsResource: {
			read: belongs, update: belongs, patch: belongs, status: belongs,
			direct: func(c *seedRequest, obj store.Object) bool {
				ci, ok := obj.(*corev1beta1.ControllerInstallation)
				return ok && ci.GetSpec().GetSeedRef().GetName() == c.seed
			},
		},
		managedSeedsResource: {read: belongs, update: belongs, patch: belongs, status: belongs},
		// An agent's own Gardenlet (garden/<seed>): read, its operation annotation removed, its status written.
		gr("seedmanagement.gardener.cloud", "gardenlets"):    {read: belongs, patch: belongs, status: belongs},
		gr("core.gardener.cloud", "controllerregistrations"): {read: all},
		gr("core.gardener.cloud", "cloudprofiles"):           readOnly,
		gr("core.gardener.cloud", "namespacedcloudprofiles"): readOnly,
		gr("core.gardener.cloud", "controllerdeployments"):   readOnly,
		gr("core.gardener.cloud", "secretbindings"):          readOnly,
		gr("security.gardener.cloud", "credentialsbindings"): readOnly,
		gr("security.gardener.cloud", "workloadidentities"):  readOnly,
		gr("core.gardener.cloud", "exposureclasses"):         readOnly,
		gr("core.gardener.cloud", "projects"):                readOnly,
		gr("", "namespaces"): {
			read: belongs,
			self: func(seed, _, name string) bool { return name == seedgraph.SeedNamespacePrefix+seed },
		},
		configMapsResource: {
			read: belongs, update: stated, patch: stated, delete: stated,
			self: func(_, namespace, name string) bool {
				return namespace == PublicNamespace || (namespace == ClusterIdentityNamespace && name == ClusterIdentityName)
			},
			direct: ownedByShoot,
			create: createConfigMap,
		},
		secretsResource: {
			read: belongs, update: belongs, patch: belongs, delete: belongs,
			self:       func(seed, namespace, _ string) bool { return namespace == seedgraph.SeedNamespacePrefix+seed },
			direct:     ownedByShoot,
			create:     createSecret,
			deleteAlso: ownBootstrapToken,
		},
		internalSecretsResource: {
			read: stated, update: stated, patch: stated, delete: stated,
			direct: shootClientCA,
			create: createInternalSecret,
		},
		leasesResource: {
			read: belongs, update: own, patch: own,
			self:   func(seed, namespace, name string) bool { return namespace == seedgraph.LeaseNamespace && name == seed },
			create: createLease,
		},
		shootStatesResource: {
			read: belongs, update: belongs, patch: belongs, delete: belongs,
			via:    shootOf,
			create: createShootState,
		},
		gr("", "events"): {
			patch:  all,
			create: func(*seedRequest, store.Object) string { return "" },
		},
		gr("certificates.k8s.io", "certificatesigningrequests"): {
			read: belongs,
			direct: func(c *seedRequest, obj store.Object) bool {
				csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
				return ok && csr.GetSpec().GetUsername() == c.user
			},
			create: createCSR,
		},
	}
}

// seedRequest is one request of an agent, for the rules' functions.
type seedRequest struct {
	ctx        context.Context
	a          *Authorizer
	seed, user string
}

// belongs reports whether an object of resource r belongs to the seed. obj is the object when the caller has it.
func (c *seedRequest) belongs(r schema.GroupResource, p policy, namespace, name string, obj store.Object) bool {
	if p.self != nil && p.self(c.seed, namespace, name) {
		return true
	}
	if obj != nil && p.direct != nil && p.direct(c, obj) {
		return true
	}
	if c.graphBelongs(r, namespace, name) {
		return true
	}
	if p.via != nil && p.via(c, namespace, name) {
		return true
	}
	// The graph may not have processed an object yet that says itself it is the seed's.
	if obj == nil && p.direct != nil && c.a.reader != nil {
		if o, err := c.a.reader.Get(c.ctx, r, namespace, name); err == nil && p.direct(c, o) {
			return true
		}
	}
	return false
}

func (c *seedRequest) graphBelongs(r schema.GroupResource, namespace, name string) bool {
	return c.graphReady() && c.a.graph.Belongs(c.seed, r.String(), namespace, name)
}

// graphHasPath reports whether the graph relates the object to the seed, whether or not it exists (Graph.HasPath).
func (c *seedRequest) graphHasPath(r schema.GroupResource, namespace, name string) bool {
	return c.graphReady() && c.a.graph.HasPath(c.seed, r.String(), namespace, name)
}

// graphReady waits until the graph holds the store's state, at most for the request's lifetime; false when there is
// no graph or the request ended first.
func (c *seedRequest) graphReady() bool {
	if c.a.graph == nil {
		return false
	}
	if c.a.graphReady != nil {
		select {
		case <-c.a.graphReady:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}

// belongsTo reports whether the object r namespace/name belongs to the seed, by r's policy.
func (c *seedRequest) belongsTo(r schema.GroupResource, namespace, name string) bool {
	return c.belongs(r, policies[r], namespace, name, nil)
}

func (a *Authorizer) authorizeSeed(ctx context.Context, at api.Attributes) error {
	c := &seedRequest{ctx: ctx, a: a, seed: at.User.Seed, user: at.User.Name}
	p, ok := policies[at.Resource]
	if !ok {
		return api.Forbidden(at, fmt.Sprintf("seed agents have no access to %s", at.Resource))
	}
	var sc scope
	switch at.Verb {
	case api.VerbGet, api.VerbList, api.VerbWatch:
		sc = p.read
	case api.VerbCreate:
		if p.create == nil {
			return api.Forbidden(at, fmt.Sprintf("seed agents may not create %s", at.Resource))
		}
		if at.Object == nil {
			return api.Forbidden(at, "no object to check")
		}
		if reason := p.create(c, at.Object); reason != "" {
			return api.Forbidden(at, reason)
		}
		return nil
	case api.VerbUpdate, api.VerbPatch:
		switch {
		case at.Subresource == "status":
			sc = p.status
		case at.Subresource != "":
			sc = none
		case at.Verb == api.VerbUpdate:
			sc = p.update
		default:
			sc = p.patch
		}
	case api.VerbDelete:
		sc = p.delete
		if p.deleteAlso != nil && at.Current != nil && p.deleteAlso(c, at.Current) {
			return nil
		}
		if at.Resource == secretsResource && at.Current == nil && at.Namespace == auth.BootstrapTokenNamespace &&
			strings.HasPrefix(at.Name, bootstrapapi.BootstrapTokenSecretPrefix) {
			// A bootstrap token that is gone (its agent deleted it once it held its certificate): NotFound, not
			// Forbidden, for the agent that made it for a ManagedSeed's agent. Nothing exists to be deleted.
			return nil
		}
		if (at.Resource == secretsResource || at.Resource == configMapsResource || at.Resource == internalSecretsResource) &&
			at.Current == nil && a.reader != nil &&
			c.publishedName(at.Namespace, at.Name) {
			// Gardener's graph knows a shoot's published objects by name, existing or not: deleting one that is
			// already gone is NotFound, not Forbidden.
			if _, err := a.reader.Get(ctx, at.Resource, at.Namespace, at.Name); apierrors.IsNotFound(err) {
				return nil
			}
		}
	}
	what := at.Resource.String()
	if at.Subresource != "" {
		what += "/" + at.Subresource
	}
	switch sc {
	case all:
		return nil
	case own:
		if p.self(c.seed, at.Namespace, at.Name) {
			return nil
		}
		return api.Forbidden(at, fmt.Sprintf("seed agents may %s only their own seed's %s", at.Verb, what))
	case belongs:
		if at.Verb == api.VerbList || at.Verb == api.VerbWatch {
			return nil // filtered by seedFilter
		}
		if c.belongs(at.Resource, p, at.Namespace, at.Name, at.Current) {
			return nil
		}
		// A get is decided by the graph's paths, as Gardener's SeedAuthorizer decides it: an object the seed's
		// objects reference may be read whether or not it exists, so a missing one is NotFound (its referencing
		// object already told the agent its name), and an object they do not reference stays Forbidden whether or
		// not it exists. Writes, lists and watches stay with the objects that exist and belong.
		if at.Verb == api.VerbGet && c.graphHasPath(at.Resource, at.Namespace, at.Name) {
			return nil
		}
		return api.Forbidden(at, fmt.Sprintf("object does not belong to seed %q", c.seed))
	case stated:
		cur := at.Current
		if cur == nil && a.reader != nil {
			cur, _ = a.reader.Get(ctx, at.Resource, at.Namespace, at.Name)
		}
		// An update must leave the object the seed's, too.
		if cur != nil && p.direct != nil && p.direct(c, cur) && (at.Object == nil || p.direct(c, at.Object)) {
			return nil
		}
		return api.Forbidden(at, fmt.Sprintf("seed agents may %s only %s owned by a Shoot of seed %q", at.Verb, what, c.seed))
	}
	return api.Forbidden(at, fmt.Sprintf("seed agents may not %s %s", at.Verb, what))
}

func (a *Authorizer) seedFilter(ctx context.Context, at api.Attributes) func(store.Object) bool {
	p := policies[at.Resource]
	switch p.read {
	case all:
		return nil
	case none:
		return func(store.Object) bool { return false }
	}
	c := &seedRequest{ctx: ctx, a: a, seed: at.User.Seed, user: at.User.Name}
	r := at.Resource
	return func(obj store.Object) bool {
		md := obj.GetMetadata()
		return c.belongs(r, p, md.GetNamespace(), md.GetName(), obj)
	}
}

// Creates: SeedRestriction.

func createOwnSeed(c *seedRequest, obj store.Object) string {
	if name := obj.GetMetadata().GetName(); name != c.seed {
		return fmt.Sprintf("seed agents may create only their own Seed %q, not %q", c.seed, name)
	}
	return ""
}

func createBackupBucket(c *seedRequest, obj store.Object) string {
	b, ok := obj.(*corev1beta1.BackupBucket)
	if !ok {
		return "not a BackupBucket"
	}
	return seedNameIs(c, "spec.seedName", b.GetSpec().GetSeedName())
}

// createBackupEntry admits an entry of this seed whose bucket is the seed's too, except for a restore's source
// entry ("source-<name>"), which refers to the bucket on the seed the shoot comes from. The shoot owning the entry
// (Gardener names it <technicalID>--<shoot UID> with an ownerReference to the shoot), if any, must be the seed's.
func createBackupEntry(c *seedRequest, obj store.Object) string {
	e, ok := obj.(*corev1beta1.BackupEntry)
	if !ok {
		return "not a BackupEntry"
	}
	if reason := seedNameIs(c, "spec.seedName", e.GetSpec().GetSeedName()); reason != "" {
		return reason
	}
	if shoot := seedgraph.OwnerShoot(e.GetMetadata()); shoot != "" && !c.belongsTo(shootsResource, e.GetMetadata().GetNamespace(), shoot) {
		return fmt.Sprintf("the owning shoot %s/%s does not belong to seed %q", e.GetMetadata().GetNamespace(), shoot, c.seed)
	}
	if strings.HasPrefix(e.GetMetadata().GetName(), "source-") {
		return ""
	}
	if bucket := e.GetSpec().GetBucketName(); !c.belongsTo(backupBucketsResource, "", bucket) {
		return fmt.Sprintf("BackupBucket %q does not belong to seed %q", bucket, c.seed)
	}
	return ""
}

func createBastion(c *seedRequest, obj store.Object) string {
	b, ok := obj.(*operationsv1alpha1.Bastion)
	if !ok {
		return "not a Bastion"
	}
	return seedNameIs(c, "spec.seedName", b.GetSpec().GetSeedName())
}

func seedNameIs(c *seedRequest, field, got string) string {
	if got != c.seed {
		return fmt.Sprintf("%s %q is not seed %q", field, got, c.seed)
	}
	return ""
}

func createLease(c *seedRequest, obj store.Object) string {
	md := obj.GetMetadata()
	if md.GetNamespace() != seedgraph.LeaseNamespace || md.GetName() != c.seed {
		return fmt.Sprintf("seed agents may create only their own Lease %s/%s", seedgraph.LeaseNamespace, c.seed)
	}
	return ""
}

// createSecret admits secrets in the seed's namespace and secrets owned by a shoot or BackupBucket of the seed
// (the certificates, kubeconfigs and generated bucket secrets a gardenlet writes into the garden).
func createSecret(c *seedRequest, obj store.Object) string {
	md := obj.GetMetadata()
	if md.GetNamespace() == seedgraph.SeedNamespacePrefix+c.seed {
		return ""
	}
	for _, ref := range md.GetOwnerReferences() {
		group, _, _ := strings.Cut(ref.GetApiVersion(), "/")
		switch {
		case group == "core.gardener.cloud" && ref.GetKind() == "Shoot" && c.belongsTo(shootsResource, md.GetNamespace(), ref.GetName()):
			return ""
		case group == "core.gardener.cloud" && ref.GetKind() == "BackupBucket" && c.belongsTo(backupBucketsResource, "", ref.GetName()):
			return ""
		}
	}
	if seed := bootstrapTokenSeed(obj); seed != "" && c.hostsManagedSeed(seed) {
		return ""
	}
	return fmt.Sprintf("seed agents may create secrets only in namespace %q, owned by a Shoot or BackupBucket of seed %q, "+
		"or as the bootstrap token of a ManagedSeed's agent whose shoot is on seed %q", seedgraph.SeedNamespacePrefix+c.seed, c.seed, c.seed)
}

// managedSeedsNamespace holds the ManagedSeeds, named as the Seeds they register (Gardener's garden namespace).
const managedSeedsNamespace = "garden"

// hostsManagedSeed reports whether the Seed named seed is registered by a ManagedSeed (garden/<seed>) whose shoot
// belongs to this seed: the agent deploys that seed's agent into the shoot, as gardenlet's managedseed controller
// does, and may read and delete that Seed and make and delete its agent's bootstrap tokens. The ManagedSeed's own
// seed is not its host.
func (c *seedRequest) hostsManagedSeed(seed string) bool {
	if c.a.reader == nil || seed == "" || seed == c.seed {
		return false
	}
	obj, err := c.a.reader.Get(c.ctx, managedSeedsResource, managedSeedsNamespace, seed)
	if err != nil {
		return false
	}
	ms, ok := obj.(*seedmanagementv1alpha1.ManagedSeed)
	shoot := ms.GetSpec().GetShoot().GetName()
	return ok && shoot != "" && c.belongsTo(shootsResource, managedSeedsNamespace, shoot)
}

// bootstrapTokenSeed is the seed a bootstrap token Secret in kube-system is made for (its description), "" for
// any other secret.
func bootstrapTokenSeed(obj store.Object) string {
	s, ok := obj.(*kcorev1.Secret)
	if !ok || s.GetMetadata().GetNamespace() != auth.BootstrapTokenNamespace || s.GetType() != string(bootstrapapi.SecretTypeBootstrapToken) {
		return ""
	}
	return auth.SeedOfDescription(string(s.GetData()[bootstrapapi.BootstrapTokenDescriptionKey]))
}

// ownedByShoot reports whether an object is owned by a Shoot of the seed: the CA bundles and SSH keypairs the agent
// publishes in the shoot's project namespace (<shoot>.ca-cluster, <shoot>.ssh-keypair), which it keeps up to date
// and deletes with the shoot.
func ownedByShoot(c *seedRequest, obj store.Object) bool {
	md := obj.GetMetadata()
	shoot := seedgraph.OwnerShoot(md)
	return shoot != "" && c.belongsTo(shootsResource, md.GetNamespace(), shoot)
}

// shootClientCA reports whether an InternalSecret is the client CA of a Shoot of the seed: named
// <shoot>.ca-client and owned by that shoot, which the agent publishes for the hub to issue kubeconfigs from.
func shootClientCA(c *seedRequest, obj store.Object) bool {
	md := obj.GetMetadata()
	shoot := seedgraph.OwnerShoot(md)
	return shoot != "" && md.GetName() == objectnames.ShootProjectResourceName(shoot, objectnames.ShootProjectSuffixCAClient) &&
		c.belongsTo(shootsResource, md.GetNamespace(), shoot)
}

// createInternalSecret admits only the client CA of a Shoot of the seed.
func createInternalSecret(c *seedRequest, obj store.Object) string {
	if shootClientCA(c, obj) {
		return ""
	}
	return fmt.Sprintf("seed agents may create only the InternalSecrets <shoot>.%s owned by a Shoot of seed %q", objectnames.ShootProjectSuffixCAClient, c.seed)
}

// publishedName reports whether namespace/name is the name of an object a Shoot of the seed publishes.
func (c *seedRequest) publishedName(namespace, name string) bool {
	shoot, ok := objectnames.ShootOfProjectResource(name)
	return ok && c.belongsTo(shootsResource, namespace, shoot)
}

// createConfigMap admits config maps owned by a Shoot of the seed (<shoot>.ca-cluster, as gardenlet writes it).
func createConfigMap(c *seedRequest, obj store.Object) string {
	if ownedByShoot(c, obj) {
		return ""
	}
	return fmt.Sprintf("seed agents may create config maps only owned by a Shoot of seed %q", c.seed)
}

// ownBootstrapToken reports whether a secret is a bootstrap token made for this seed's agent, which the agent may
// delete once it holds its certificate, or for the agent of a ManagedSeed it hosts, which it deletes once that agent
// registered or the ManagedSeed is gone.
func ownBootstrapToken(c *seedRequest, cur store.Object) bool {
	seed := bootstrapTokenSeed(cur)
	return seed != "" && (seed == c.seed || c.hostsManagedSeed(seed))
}

// shootOf reports whether the shoot a ShootState is named after belongs to the seed.
func shootOf(c *seedRequest, namespace, name string) bool {
	return c.belongsTo(shootsResource, namespace, name)
}

func createShootState(c *seedRequest, obj store.Object) string {
	md := obj.GetMetadata()
	if !shootOf(c, md.GetNamespace(), md.GetName()) {
		return fmt.Sprintf("shoot %s/%s does not belong to seed %q", md.GetNamespace(), md.GetName(), c.seed)
	}
	return ""
}

// createCSR admits a request for the agent's own seed client certificate: spec.username is the agent's user and the
// subject is O=[gardener.cloud:system:seeds], CN=gardener.cloud:system:seed:<seed>.
func createCSR(c *seedRequest, obj store.Object) string {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return "not a CertificateSigningRequest"
	}
	if u := csr.GetSpec().GetUsername(); u != c.user {
		return fmt.Sprintf("spec.username %q is not %q", u, c.user)
	}
	block, _ := pem.Decode(csr.GetSpec().GetRequest())
	if block == nil {
		return "spec.request is not a PEM-encoded certificate request"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Sprintf("spec.request: %v", err)
	}
	if !slices.Equal(req.Subject.Organization, []string{auth.SeedsGroup}) || req.Subject.CommonName != c.user {
		return fmt.Sprintf("the request's subject (O=%q, CN=%q) is not seed %q's (O=[%s], CN=%s)", req.Subject.Organization, req.Subject.CommonName, c.seed, auth.SeedsGroup, c.user)
	}
	return ""
}
