package objectnames

import "strings"

// What gardenlet publishes of a shoot in its project namespace of the garden, named <shoot>.<suffix>
// (Gardener's ComputeShootProjectResourceName).
const (
	ShootProjectSuffixCACluster     = "ca-cluster"
	ShootProjectSuffixSSHKeypair    = "ssh-keypair"
	ShootProjectSuffixSSHKeypairOld = "ssh-keypair.old"
	// ShootProjectSuffixCAClient names the InternalSecret holding the shoot's client CA (ca.crt, ca.key: the CA
	// that signs new client certificates; bundle.crt: every client CA the shoot's kube-apiserver trusts). The agent
	// writes it; the hub issues kubeconfigs from it. Project members never read it.
	ShootProjectSuffixCAClient = "ca-client"
)

// shootProjectSuffixes are the suffixes above, the longer of two that end alike first, so that the first suffix a
// name ends with is the one it was made with.
var shootProjectSuffixes = []string{ShootProjectSuffixSSHKeypairOld, ShootProjectSuffixSSHKeypair, ShootProjectSuffixCACluster,
	ShootProjectSuffixCAClient}

// ShootProjectResourceName is "<shoot>.<suffix>".
func ShootProjectResourceName(shoot, suffix string) string { return shoot + "." + suffix }

// ShootOfProjectResource returns the shoot whose published object has this name: the inverse of
// ShootProjectResourceName for the suffixes above. ok is false for any other name, and for a name that is only a
// suffix.
func ShootOfProjectResource(name string) (shoot string, ok bool) {
	for _, suffix := range shootProjectSuffixes {
		if shoot, ok := strings.CutSuffix(name, "."+suffix); ok {
			return shoot, shoot != ""
		}
	}
	return "", false
}

// BackupEntryName is Gardener's name of a shoot's BackupEntry: "<technical ID>--<shoot UID>".
func BackupEntryName(technicalID, shootUID string) string { return technicalID + "--" + shootUID }

// seedBootstrapTokenPrefix and seedBootstrapTokenSuffix surround the seed's name in the description of a seed
// agent's bootstrap token.
const (
	seedBootstrapTokenPrefix = "A bootstrap token for the trellis-agent of seed "
	seedBootstrapTokenSuffix = "."
)

// SeedBootstrapTokenDescription is the description (data key "description") of the bootstrap token Secret made for
// the agent of seed: the hub's CSR approval reads the seed from it (a token may only bootstrap that seed's agent),
// and the seed authorizer lets the agent of a ManagedSeed's hosting seed create and delete such tokens for the seed
// it registers. The hub (trellisctl seed bootstrap-token create) and the agent (ManagedSeeds) both write it.
func SeedBootstrapTokenDescription(seed string) string {
	return seedBootstrapTokenPrefix + seed + seedBootstrapTokenSuffix
}

// SeedOfBootstrapTokenDescription is the inverse of SeedBootstrapTokenDescription: the seed the description names,
// "" when it is not such a description (the caller checks that the name is a valid seed name).
func SeedOfBootstrapTokenDescription(desc string) string {
	seed, ok := strings.CutPrefix(desc, seedBootstrapTokenPrefix)
	if !ok {
		return ""
	}
	if seed, ok = strings.CutSuffix(seed, seedBootstrapTokenSuffix); !ok {
		return ""
	}
	return seed
}
