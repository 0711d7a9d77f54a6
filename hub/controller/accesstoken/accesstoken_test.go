package accesstoken_test

import (
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/controller/accesstoken"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func token(ns, name, sa, saUID string) *authv1alpha1.AccessToken {
	return &authv1alpha1.AccessToken{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   &authv1alpha1.AccessTokenSpec{ServiceAccountName: sa},
		Status: &authv1alpha1.AccessTokenStatus{ServiceAccountUid: saUID, TokenHash: "sha256:00"}}
}

// TestDeletesTokensOfDeletedServiceAccounts runs the controller on a real store: the tokens of a ServiceAccount go
// when it is deleted, tokens issued for an earlier ServiceAccount of the same name go at once, and tokens of other
// ServiceAccounts and user tokens stay.
func TestDeletesTokensOfDeletedServiceAccounts(t *testing.T) {
	reg := controllertest.NewRegistry(t)
	tokens := controllertest.Collection(t, reg, "auth.trellis.dev", "accesstokens")
	sas := controllertest.Collection(t, reg, "", "serviceaccounts")
	ci := controllertest.Create(t, sas, &kcorev1.ServiceAccount{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "ci"}})
	robot := controllertest.Create(t, sas, &kcorev1.ServiceAccount{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "robot"}})
	controllertest.Create(t, tokens, token("garden-dev", "ci-1", "ci", ci.GetMetadata().GetUid()))
	controllertest.Create(t, tokens, token("garden-dev", "ci-2", "ci", ci.GetMetadata().GetUid()))
	controllertest.Create(t, tokens, token("garden-dev", "robot-1", "robot", robot.GetMetadata().GetUid()))
	controllertest.Create(t, tokens, token("garden-dev", "robot-old", "robot", "uid-of-an-earlier-robot"))
	user := token("trellis-system", "alice", "", "")
	user.Spec.User = "alice"
	controllertest.Create(t, tokens, user)

	c, err := accesstoken.New(accesstoken.Config{Source: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer controllertest.Start(t, c)()
	exists := func(ns, name string) bool {
		return controllertest.Get[*authv1alpha1.AccessToken](t, tokens, ns, name) != nil
	}

	controllertest.Eventually(t, "the token issued for an earlier robot is deleted", func() bool { return !exists("garden-dev", "robot-old") })
	controllertest.Consistently(t, "tokens of existing service accounts and user tokens stay", 300*time.Millisecond, func() bool {
		return exists("garden-dev", "ci-1") && exists("garden-dev", "ci-2") && exists("garden-dev", "robot-1") && exists("trellis-system", "alice")
	})

	controllertest.Delete(t, sas, "garden-dev", "ci")
	controllertest.Eventually(t, "the tokens of the deleted service account are deleted", func() bool {
		return !exists("garden-dev", "ci-1") && !exists("garden-dev", "ci-2")
	})
	if !exists("garden-dev", "robot-1") || !exists("trellis-system", "alice") {
		t.Fatal("tokens of other service accounts or users were deleted")
	}

	// A ServiceAccount recreated under the name does not inherit the earlier one's tokens: they go.
	controllertest.Create(t, tokens, token("garden-dev", "ci-3", "ci", ci.GetMetadata().GetUid()))
	controllertest.Create(t, sas, &kcorev1.ServiceAccount{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "ci"}})
	controllertest.Eventually(t, "a token of the earlier service account is deleted", func() bool { return !exists("garden-dev", "ci-3") })
}
