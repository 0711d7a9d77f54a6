package seedtest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAuditLog: WithAuditLog records who did what: a list of Secrets as an impersonated user shows with the admin as
// user, the impersonated one, the verb and resource, and the 403 RBAC gave; a get of a namespace by the admin shows
// its name.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	s := Start(t, WithAuditLog())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "audit-probe", Groups: []string{"probes"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("an unprivileged user listed Secrets")
	}
	// The ResponseComplete event is written as the handler returns, which may be just after the client has the
	// response: read until both are there.
	var gotGet, gotList bool
	var events []AuditEvent
	for deadline := time.Now().Add(10 * time.Second); !(gotGet && gotList) && time.Now().Before(deadline); {
		events, err = ReadAuditLog(s.AuditLog)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			r := e.ObjectRef
			if r == nil {
				continue
			}
			if e.Verb == "get" && r.Resource == "namespaces" && r.Name == "default" && e.Code() == 200 {
				gotGet = true
			}
			if e.Verb == "list" && r.Resource == "secrets" && r.Namespace == "kube-system" && e.ImpersonatedUser != nil &&
				e.ImpersonatedUser.Username == "audit-probe" && e.Code() == 403 && e.User.Username != "" {
				gotList = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !gotGet || !gotList {
		t.Errorf("%d events; the admin's get of namespace default seen: %v; the impersonated list of secrets refused "+
			"with 403 seen: %v", len(events), gotGet, gotList)
	}
}
