package resources

// SyncedAt returns synced versions that put every streamed resource at revision: what a HeartbeatAck's
// synced_revision stands for (the hub streams every resource of Streamed through one revision).
func SyncedAt(revision int64) map[string]int64 {
	m := make(map[string]int64, len(Streamed))
	for _, r := range Streamed {
		m[r] = revision
	}
	return m
}
