// Package store owns Trellis' persistence: objects in etcd (embedded or external), the watch cache that serves every
// read, and watches with resumable history.
//
// Layout. An object lives under <prefix>/<group or "core">/<resource>/[<namespace>/]<name>, its value is the
// deterministic protobuf encoding of the whole object with metadata.resourceVersion cleared, AES-256-GCM encrypted for
// resources marked Encrypted. resourceVersion is the etcd ModRevision of the key; every write is a compare-and-swap
// transaction on it.
//
// Reads. Get, List (first page) and ByIndex are answered by the per-resource watch cache, never by etcd. Before a read
// the cache is brought up to the highest revision this Store has written to that resource, so a client always reads its
// own writes. Only List continuations go to etcd, at the revision of the first page, which gives Kubernetes' snapshot
// paging.
//
// Sharing. Objects returned by Get, List, ByIndex and delivered by watches are shared with the cache and with other
// callers: they must be treated as immutable. Clone them (proto.Clone) before modifying. Objects returned by writes
// (Create, Update, UpdateStatus, GuaranteedUpdate, Delete) belong to the caller and leave the objects passed in as
// they were; a caller may change both afterwards. A write made with a context from WithEncodedAnswer instead only
// reads its result: the store copies only the metadata it sets, and the result shares every other field with the
// objects passed in and the cached state (a deletion's, the deleted state's fields), so the messages, lists and maps
// they share must not be changed in place afterwards. The cur object handed to a GuaranteedUpdate mutate function is a private copy.
//
// Encodings. CachedEncoding memoizes an encoding (the REST gateway's JSON) of each cached state. A write made with a
// context from WithEncodedAnswer (the REST gateway's calls to the kinds' servers) is remembered by its result, weakly,
// until the cache applies it: CachedEncoding of that result, while the caller has not changed it, is the written
// state's memoized encoding, so a state a REST client wrote is encoded once for the answer and every later get, list
// and watch of it, whichever comes first (answers.go).
//
// Errors. Every error a Collection returns is a *k8s.io/apimachinery/pkg/api/errors.StatusError, so the API edge maps
// them to gRPC and HTTP codes in one place.
//
// History. Each resource keeps its last WatchWindow events, none applied longer than WatchWindowAge ago (trimmed
// once a second with the bookmarks), so a watch resumes from any revision they cover; older revisions get 410 Expired
// and the client re-lists. The age bound gives back what a burst of writes (a fleet's arrival, 10,000 Seeds and
// Shoots written several times each) left in the history of a resource that is quiet afterwards. On Register the
// cache also loads, in the background, the resource's events of the last WatchWindow etcd revisions (they count as
// applied when the cache's first own event was), so clients of a restarted hub can still resume.
//
// Embedded etcd. The store calls the embedded member in its own process (inprocess.go: etcd's v3client, its watch
// streams' sends queued), so requests and events are not marshaled and sent through the member's socket, which
// stays open for etcdctl and other tools.
//
// Goroutines. Open starts the embedded etcd (if any) and a progress requester; Register starts two goroutines per
// resource (its etcd watch and the history backfill); Watch starts one goroutine per watcher; each in-process etcd
// watch stream has one that forwards its requests, ending with the stream. Close stops all of them and waits for
// them.
package store
