package cache_test

import (
	"slices"
	"testing"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/hub/agentlink"
)

// The cache's resource names are the ones the hub streams.
func TestResourcesMatchTheHub(t *testing.T) {
	ours := []string{
		cache.Seeds, cache.Shoots, cache.BackupBuckets, cache.BackupEntries, cache.Bastions,
		cache.ControllerInstallations, cache.ControllerRegistrations, cache.ControllerDeployments, cache.ManagedSeeds,
		cache.SecretBindings, cache.CredentialsBindings, cache.CloudProfiles, cache.NamespacedCloudProfiles,
		cache.ExposureClasses, cache.Projects, cache.WorkloadIdentities, cache.Secrets, cache.ConfigMaps,
	}
	hub := slices.Clone(agentlink.Streamed)
	slices.Sort(ours)
	slices.Sort(hub)
	if !slices.Equal(ours, hub) {
		t.Fatalf("cache resources %v\nhub streams      %v", ours, hub)
	}
}
