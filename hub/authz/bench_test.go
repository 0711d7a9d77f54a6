package authz_test

import (
	"context"
	"fmt"
	"github.com/trellis-dev/trellis/hub/admission"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/authz"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// BenchmarkAuthorizeProjectMember decides requests of a user who is a member of 1 of 10,000 projects (each with
// five members), on the hub's real store and indexes: an allowed create in its project namespace, a denied one in
// another project's namespace, and a get of its project.
//
//	go test -run '^$' -bench AuthorizeProjectMember ./hub/authz/
func BenchmarkAuthorizeProjectMember(b *testing.B) {
	const projects = 10000
	reg, err := api.NewRegistry(b.Context(), api.Config{Store: storetest.NewStore(b), Services: grpc.NewServer(), Indexes: authz.Indexes(), Admission: admission.Builtin()})
	if err != nil {
		b.Fatal(err)
	}
	c, _ := reg.Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"})
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				members := []*corev1beta1.ProjectMember{}
				for m := range 5 {
					members = append(members, &corev1beta1.ProjectMember{ApiGroup: "rbac.authorization.k8s.io", Kind: "User",
						Name: fmt.Sprintf("user-%d", (i*5+m)%projects), Role: "admin"})
				}
				p := &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}, Spec: &corev1beta1.ProjectSpec{
					Namespace: proto.String(fmt.Sprintf("garden-p%d", i)), Members: members,
					Owner: &corev1beta1.Subject{ApiGroup: "rbac.authorization.k8s.io", Kind: "User", Name: fmt.Sprintf("owner-%d", i)}}}
				if _, err := c.Create(context.Background(), p); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range projects {
		work <- i
	}
	close(work)
	wg.Wait()

	az := authz.New(authz.Config{Index: reg, Reader: reg})
	user := auth.User{Name: "owner-5000", Groups: []string{"team-x", auth.GroupAuthned}}
	shoots := schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		at    api.Attributes
		allow bool
	}{
		{"create-shoot-allowed", api.Attributes{User: user, Verb: api.VerbCreate, Resource: shoots, Namespace: "garden-p5000", Name: "s"}, true},
		{"create-shoot-denied", api.Attributes{User: user, Verb: api.VerbCreate, Resource: shoots, Namespace: "garden-p4000", Name: "s"}, false},
		{"list-shoots-all-namespaces", api.Attributes{User: user, Verb: api.VerbList, Resource: shoots}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := az.Authorize(ctx, bc.at); (err == nil) != bc.allow {
				b.Fatalf("want allowed %v, got %v", bc.allow, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = az.Authorize(ctx, bc.at)
			}
		})
	}
}
