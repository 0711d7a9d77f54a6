// Package backup owns the garden's backups: scheduled snapshots of the hub's etcd (embedded or external, through
// etcd's Maintenance.Snapshot), kept in an object store with retention by count and age, and the restore of a
// snapshot into a new data directory (etcdutl's snapshot restore).
//
// The object store is an interface (ObjectStore); Dir, a local directory, is its one implementation here — a bucket
// in a cloud object store is another implementation of the same three methods.
package backup
