// Package garden owns an extension's access to the garden: a gRPC connection to the Trellis hub with typed clients
// of the generated SDK (proto/gen) for what extensions read and write there (ShootState for worker state and
// restore, Shoot, Seed, CloudProfile, BackupBucket, BackupEntry, Secret).
//
// The connection is TLS, authenticated by a bearer token (re-read from its file when the file changes, as projected
// service-account tokens are rotated) or a client certificate. ConfigFromEnv finds the hub the way Trellis tools and
// Gardener extensions do: TRELLIS_HUB, TRELLIS_CA (a file) and TRELLIS_TOKEN, or else the kubeconfig file named by
// GARDEN_KUBECONFIG (the variable Gardener injects into extensions); SEED_NAME names the seed.
//
//	cfg, err := garden.ConfigFromEnv()
//	...
//	g, err := garden.New(cfg)
//	...
//	defer g.Close()
//	state, err := g.ShootStates.Get(ctx, &metav1.GetRequest{Namespace: ns, Name: name})
package garden
