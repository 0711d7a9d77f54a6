package main

// group is one API group and version served by the hub.
type group struct {
	Group   string // API group; "" is Kubernetes' core group
	Version string
	Package string // proto package
	Dir     string // directory under proto/
	GoAlias string // Go package name of the generated code
	Kinds   []kind
}

// kind is one resource of a group.
type kind struct {
	Kind       string
	Resource   string
	File       string // proto file (under Dir) defining the message
	Namespaced bool
	Status     bool // has a status subresource
	// Binding gives the kind Gardener's binding subresource, which writes spec.seedName alone: a Shoot's scheduling
	// and, from one seed to another, its control-plane migration.
	Binding   bool
	Encrypted bool     // stored encrypted at rest
	Fields    []string // extra field selector paths (JSON names), beyond metadata.name and metadata.namespace
	// StoredAs names the group/version whose message is stored when this version is served by conversion
	// (ControllerDeployment v1beta1 is stored in the v1 shape).
	StoredAs string
	// SeedGraph: the hub's seed graph follows the kind, so its objects can belong to seeds (the seed authorizer lets
	// a seed's agent read those that do). Streamed: the hub also streams the objects of a seed to its agent on the
	// agent link, where the agent's cache holds them; the others agents read on demand. Both are set on one version
	// of a resource only (proto/resources lists resources, not versions); Streamed needs SeedGraph.
	SeedGraph bool
	Streamed  bool
}

// groups is the table of everything the hub serves. Adding a kind here and running `make generate` gives it a
// typed gRPC service, REST routes and a place in the hub's registry.
var groups = []group{
	// The stored version of a resource comes before the versions served by conversion.
	{
		Group: "core.gardener.cloud", Version: "v1", Package: "trellis.core.v1",
		Dir: "trellis/core/v1", GoAlias: "corev1",
		Kinds: []kind{
			{Kind: "ControllerDeployment", Resource: "controllerdeployments", File: "controllerdeployment", Encrypted: true, SeedGraph: true, Streamed: true},
		},
	},
	{
		Group: "core.gardener.cloud", Version: "v1beta1", Package: "trellis.core.v1beta1",
		Dir: "trellis/core/v1beta1", GoAlias: "corev1beta1",
		Kinds: []kind{
			{Kind: "BackupBucket", Resource: "backupbuckets", File: "backupbucket", Status: true, Fields: []string{"spec.seedName"}, SeedGraph: true, Streamed: true},
			{Kind: "BackupEntry", Resource: "backupentries", File: "backupentry", Namespaced: true, Status: true, Fields: []string{"spec.seedName", "status.seedName", "spec.bucketName"}, SeedGraph: true, Streamed: true},
			{Kind: "CloudProfile", Resource: "cloudprofiles", File: "cloudprofile", Status: true, SeedGraph: true, Streamed: true},
			{Kind: "ControllerDeployment", Resource: "controllerdeployments", File: "controllerdeployment", Encrypted: true, StoredAs: "core.gardener.cloud/v1"},
			{Kind: "ControllerInstallation", Resource: "controllerinstallations", File: "controllerinstallation", Status: true, Fields: []string{"spec.seedRef.name", "spec.registrationRef.name", "spec.deploymentRef.name"}, SeedGraph: true, Streamed: true},
			{Kind: "ControllerRegistration", Resource: "controllerregistrations", File: "controllerregistration", SeedGraph: true, Streamed: true},
			{Kind: "ExposureClass", Resource: "exposureclasses", File: "exposureclass", SeedGraph: true, Streamed: true},
			{Kind: "InternalSecret", Resource: "internalsecrets", File: "internalsecret", Namespaced: true, Encrypted: true, Fields: []string{"type"}},
			{Kind: "NamespacedCloudProfile", Resource: "namespacedcloudprofiles", File: "namespacedcloudprofile", Namespaced: true, Status: true, Fields: []string{"spec.parent.name"}, SeedGraph: true, Streamed: true},
			{Kind: "Project", Resource: "projects", File: "project", Status: true, Fields: []string{"spec.namespace"}, SeedGraph: true, Streamed: true},
			{Kind: "Quota", Resource: "quotas", File: "quota", Namespaced: true},
			{Kind: "SecretBinding", Resource: "secretbindings", File: "secretbinding", Namespaced: true, Fields: []string{"provider.type"}, SeedGraph: true, Streamed: true},
			{Kind: "Seed", Resource: "seeds", File: "seed", Status: true, SeedGraph: true, Streamed: true},
			{Kind: "Shoot", Resource: "shoots", File: "shoot", Namespaced: true, Status: true, Binding: true, Fields: []string{"spec.seedName", "status.seedName", "spec.cloudProfileName", "spec.cloudProfile.name"}, SeedGraph: true, Streamed: true},
			{Kind: "ShootState", Resource: "shootstates", File: "shootstate", Namespaced: true, Encrypted: true, SeedGraph: true},
		},
	},
	{
		Group: "security.gardener.cloud", Version: "v1alpha1", Package: "trellis.security.v1alpha1",
		Dir: "trellis/security/v1alpha1", GoAlias: "securityv1alpha1",
		Kinds: []kind{
			{Kind: "CredentialsBinding", Resource: "credentialsbindings", File: "credentialsbinding", Namespaced: true, Fields: []string{"provider.type"}, SeedGraph: true, Streamed: true},
			{Kind: "WorkloadIdentity", Resource: "workloadidentities", File: "workloadidentity", Namespaced: true, Status: true, SeedGraph: true, Streamed: true},
		},
	},
	{
		Group: "seedmanagement.gardener.cloud", Version: "v1alpha1", Package: "trellis.seedmanagement.v1alpha1",
		Dir: "trellis/seedmanagement/v1alpha1", GoAlias: "seedmanagementv1alpha1",
		Kinds: []kind{
			{Kind: "Gardenlet", Resource: "gardenlets", File: "gardenlet", Namespaced: true, Status: true, SeedGraph: true, Streamed: true},
			{Kind: "ManagedSeed", Resource: "managedseeds", File: "managedseed", Namespaced: true, Status: true, Fields: []string{"spec.shoot.name"}, SeedGraph: true, Streamed: true},
			{Kind: "ManagedSeedSet", Resource: "managedseedsets", File: "managedseedset", Namespaced: true, Status: true},
		},
	},
	{
		Group: "operations.gardener.cloud", Version: "v1alpha1", Package: "trellis.operations.v1alpha1",
		Dir: "trellis/operations/v1alpha1", GoAlias: "operationsv1alpha1",
		Kinds: []kind{
			{Kind: "Bastion", Resource: "bastions", File: "bastion", Namespaced: true, Status: true, Fields: []string{"spec.seedName", "spec.shootRef.name"}, SeedGraph: true, Streamed: true},
		},
	},
	{
		Group: "", Version: "v1", Package: "trellis.kubernetes.core.v1",
		Dir: "trellis/kubernetes/core/v1", GoAlias: "kcorev1",
		Kinds: []kind{
			{Kind: "ConfigMap", Resource: "configmaps", File: "configmap", Namespaced: true, SeedGraph: true, Streamed: true},
			{Kind: "Event", Resource: "events", File: "event", Namespaced: true, Fields: []string{"involvedObject.kind", "involvedObject.name", "involvedObject.namespace", "involvedObject.uid", "reason", "type"}},
			{Kind: "Namespace", Resource: "namespaces", File: "namespace", Status: true, Fields: []string{"status.phase"}, SeedGraph: true},
			{Kind: "Secret", Resource: "secrets", File: "secret", Namespaced: true, Encrypted: true, Fields: []string{"type"}, SeedGraph: true, Streamed: true},
			{Kind: "ServiceAccount", Resource: "serviceaccounts", File: "serviceaccount", Namespaced: true},
		},
	},
	{
		Group: "coordination.k8s.io", Version: "v1", Package: "trellis.kubernetes.coordination.v1",
		Dir: "trellis/kubernetes/coordination/v1", GoAlias: "coordinationv1",
		Kinds: []kind{
			{Kind: "Lease", Resource: "leases", File: "lease", Namespaced: true, SeedGraph: true},
		},
	},
	{
		Group: "certificates.k8s.io", Version: "v1", Package: "trellis.kubernetes.certificates.v1",
		Dir: "trellis/kubernetes/certificates/v1", GoAlias: "certificatesv1",
		Kinds: []kind{
			{Kind: "CertificateSigningRequest", Resource: "certificatesigningrequests", File: "certificatesigningrequest", Status: true, Fields: []string{"spec.signerName"}, SeedGraph: true},
		},
	},
	{
		Group: "rbac.authorization.k8s.io", Version: "v1", Package: "trellis.kubernetes.rbac.v1",
		Dir: "trellis/kubernetes/rbac/v1", GoAlias: "rbacv1",
		Kinds: []kind{
			{Kind: "ClusterRole", Resource: "clusterroles", File: "clusterrole"},
		},
	},
	{
		Group: "auth.trellis.dev", Version: "v1alpha1", Package: "trellis.auth.v1alpha1",
		Dir: "trellis/auth/v1alpha1", GoAlias: "authv1alpha1",
		Kinds: []kind{
			{Kind: "AccessToken", Resource: "accesstokens", File: "accesstoken", Namespaced: true, Fields: []string{"spec.user", "spec.serviceAccountName"}},
		},
	},
}
