package resource

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Kind describes one kind served by the hub, as the CLI needs it.
type Kind struct {
	// Group is the API group, "" for Kubernetes' core group; Version its version.
	Group, Version string
	// Kind is the object kind ("Shoot"), Resource its plural resource name ("shoots"), Singular its lower-case
	// singular ("shoot").
	Kind, Resource, Singular string
	// ShortNames are abbreviations of Resource ("cm").
	ShortNames []string
	// Namespaced is false for cluster-scoped kinds.
	Namespaced bool
	// Columns are the kind's own table columns, between NAME and AGE.
	Columns []Column
	// Unnamed tables have no NAME and AGE columns (Events, as in kube-apiserver).
	Unnamed bool
	// PatchSubresources are the subresources Patch takes besides the object itself ("status", "binding").
	PatchSubresources []string
	// Subresources are the RPCs of the service beyond Get, List, Watch, Create, Update, Patch and Delete.
	Subresources []Subresource
	// New returns an empty object of the kind.
	New func() proto.Message
	// Client returns a client of the kind's service on conn.
	Client func(conn grpc.ClientConnInterface) Client
}

// APIVersion is group/version, or the version alone for the core group.
func (k *Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// GroupResource is resource.group as Kubernetes' messages name it ("shoots.core.gardener.cloud", "secrets").
func (k *Kind) GroupResource() string {
	if k.Group == "" {
		return k.Resource
	}
	return k.Resource + "." + k.Group
}

// Subresource returns the subresource RPC the CLI calls command, if the kind has one.
func (k *Kind) Subresource(command string) (Subresource, bool) {
	for _, s := range k.Subresources {
		if s.Command == command {
			return s, true
		}
	}
	return Subresource{}, false
}

// matches reports whether name, as a user types it, names the kind: its resource, singular, kind or a short name
// (case-insensitive), optionally qualified as NAME.GROUP or NAME.VERSION.GROUP.
func (k *Kind) matches(name string) bool {
	name = strings.ToLower(name)
	for _, n := range k.names() {
		switch name {
		case n, n + "." + k.Group, n + "." + k.Version + "." + k.Group:
			return true
		}
	}
	return false
}

func (k *Kind) names() []string {
	return append([]string{k.Resource, k.Singular, strings.ToLower(k.Kind)}, k.ShortNames...)
}

// Column is one column of a kind's table.
type Column struct {
	// Name is the header.
	Name string
	// Path selects the value (package proto/jsonpath syntax, e.g. ".spec.region").
	Path string
	// Priority 0 is shown in the table, higher only with -o wide.
	Priority int
	// Format renders the value.
	Format Format
}

// Format says how a column renders its value; the zero value prints it as it is. The formats are those of
// trellis.cli.v1.Format (proto/trellis/cli/v1/options.proto).
type Format int

// The formats.
const (
	FormatNone Format = iota
	FormatAge
	FormatLastOperation
	FormatHibernation
	FormatReady
	FormatCount
	FormatEventLastSeen
	FormatEventFirstSeen
	FormatEventObject
	FormatEventSource
	FormatEventCount
	FormatTrimmed
)

// Subresource is an RPC of a kind's service beyond the standard ones, e.g. UpdateStatus and UpdateBinding, which the
// CLI offers as a command of its own.
type Subresource struct {
	// RPC is the method name ("UpdateStatus"), Command the CLI's command for it ("update-status").
	RPC, Command string
	// Path is the subresource of its REST route ("status"), "" if the route has none.
	Path string
	// Help is the RPC's comment in the proto.
	Help string
	// Object is true when the RPC takes an object of the kind: the CLI then sends the current object with the
	// user's changes. Otherwise it sends the message NewInput returns, read from the user's file.
	Object bool
	// NewInput returns an empty request message.
	NewInput func() proto.Message
	// Call invokes the RPC on conn.
	Call func(ctx context.Context, conn grpc.ClientConnInterface, in proto.Message) (proto.Message, error)
}

// Meta returns an object's metadata (every kind's message has one), nil for other messages.
func Meta(o proto.Message) *metav1.ObjectMeta {
	if m, ok := o.(interface{ GetMetadata() *metav1.ObjectMeta }); ok {
		return m.GetMetadata()
	}
	return nil
}
