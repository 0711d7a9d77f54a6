package csr_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/csr"
	"github.com/trellis-dev/trellis/hub/store"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// Old CSRs are deleted as kube-controller-manager's cleaner deletes them: decided ones after an hour, pending ones
// after a day.
func TestCleanup(t *testing.T) {
	h := hubtest.Start(t)
	ctx := context.Background()
	coll, _ := h.Registry().Collection(schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"})
	for _, name := range []string{"pending", "approved"} {
		if _, err := coll.Create(ctx, &certificatesv1.CertificateSigningRequest{Metadata: &metav1.ObjectMeta{Name: name},
			Spec: &certificatesv1.CertificateSigningRequestSpec{Request: []byte("x"), SignerName: csr.SignerName, Usages: []string{"client auth"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := coll.GuaranteedUpdate(ctx, "", "approved", true, func(cur store.Object) (store.Object, error) {
		c := cur.(*certificatesv1.CertificateSigningRequest)
		c.Status = &certificatesv1.CertificateSigningRequestStatus{Conditions: []*certificatesv1.CertificateSigningRequestCondition{{Type: "Approved", Status: "True"}}}
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := &csr.Controller{CSRs: coll, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
	names := func() []string {
		res, err := coll.List(ctx, "", store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range res.Items {
			out = append(out, o.GetMetadata().GetName())
		}
		return out
	}
	if n := c.Cleanup(ctx); n != 0 {
		t.Fatalf("fresh CSRs deleted: %d", n)
	}
	now = now.Add(61 * time.Minute)
	if n := c.Cleanup(ctx); n != 1 || len(names()) != 1 || names()[0] != "pending" {
		t.Fatalf("after an hour: deleted %d, left %v; want the approved one gone", n, names())
	}
	now = now.Add(24 * time.Hour)
	if n := c.Cleanup(ctx); n != 1 || len(names()) != 0 {
		t.Fatalf("after a day: deleted %d, left %v", n, names())
	}
}
