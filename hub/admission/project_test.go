package admission_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/auth"
	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func member(kind, name, role string, roles ...string) *corev1beta1.ProjectMember {
	return &corev1beta1.ProjectMember{Kind: kind, Name: name, Role: role, Roles: roles}
}

// Creating a project records its creator and owner as Gardener's admission does; defaulting makes the owner a member
// and gives the owner role to the owner's entry alone (Gardener's Canonicalize).
func TestProjectOwner(t *testing.T) {
	p := plugins.For(&corev1beta1.Project{})
	ctx := auth.WithUser(context.Background(), auth.User{Name: "carl"})
	for _, tc := range []struct {
		name        string
		spec        *corev1beta1.ProjectSpec
		owner       string
		wantMembers []*corev1beta1.ProjectMember
	}{
		{name: "creator becomes owner", spec: &corev1beta1.ProjectSpec{}, owner: "carl",
			wantMembers: []*corev1beta1.ProjectMember{{ApiGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "carl", Role: "admin", Roles: []string{"owner"}}}},
		{name: "member with the owner role becomes owner", spec: &corev1beta1.ProjectSpec{Members: []*corev1beta1.ProjectMember{member("User", "ann", "admin", "owner")}}, owner: "ann",
			wantMembers: []*corev1beta1.ProjectMember{{ApiGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "ann", Role: "admin", Roles: []string{"owner"}}}},
		{name: "the owner role moves to the owner", spec: &corev1beta1.ProjectSpec{
			Owner:   &corev1beta1.Subject{Kind: "User", Name: "bo"},
			Members: []*corev1beta1.ProjectMember{member("User", "ann", "owner", "viewer"), member("User", "bo", "viewer")}}, owner: "bo",
			wantMembers: []*corev1beta1.ProjectMember{
				{ApiGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "ann", Role: "viewer", Roles: []string{}},
				{ApiGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "bo", Role: "viewer", Roles: []string{"owner"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: "dev"}, Spec: tc.spec}
			obj.Spec.CreatedBy = &corev1beta1.Subject{Kind: "User", Name: "forged"}
			p.PrepareCreate(ctx, obj)
			p.Default(obj)
			if got := obj.GetSpec().GetCreatedBy(); got.GetName() != "carl" || got.GetKind() != "User" {
				t.Errorf("createdBy: want carl, got %v", got)
			}
			if got := obj.GetSpec().GetOwner(); got.GetName() != tc.owner {
				t.Errorf("owner: want %s, got %v", tc.owner, got)
			}
			if !slices.EqualFunc(obj.GetSpec().GetMembers(), tc.wantMembers, func(a, b *corev1beta1.ProjectMember) bool {
				return a.GetName() == b.GetName() && a.GetKind() == b.GetKind() && a.GetApiGroup() == b.GetApiGroup() &&
					a.GetRole() == b.GetRole() && slices.Equal(a.GetRoles(), b.GetRoles())
			}) {
				t.Errorf("members: want %v, got %v", tc.wantMembers, obj.GetSpec().GetMembers())
			}
		})
	}
}

// An AccessToken's token is issued on create, concealed before it is stored and revealed in the response; updates
// keep the hub's status and only the description and revoked (false to true) may change.
func TestAccessTokenAdmission(t *testing.T) {
	p := plugins.For(&authv1alpha1.AccessToken{})
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	ctx := admission.WithConfig(context.Background(), admission.Config{Now: func() time.Time { return now }, AccessTokenMaxLifetime: 48 * time.Hour})
	tok := &authv1alpha1.AccessToken{Metadata: &metav1.ObjectMeta{Namespace: auth.UserTokenNamespace, Name: "t"},
		Spec:   &authv1alpha1.AccessTokenSpec{User: "u"},
		Status: &authv1alpha1.AccessTokenStatus{TokenHash: "sha256:forged"}}
	p.PrepareCreate(ctx, tok)
	token := tok.GetStatus().GetToken()
	if _, ok := auth.ParseAccessToken(token); !ok || tok.GetStatus().GetTokenHash() != auth.AccessTokenHash(token) {
		t.Fatalf("issued status: %v", tok.GetStatus())
	}
	// The default lifetime (90 days) is beyond the configured maximum.
	if errs := p.Validate(ctx, nil, tok, nil); len(errs) != 1 || errs[0].Field != "spec.expirationTimestamp" {
		t.Errorf("90 days with a 48h maximum: want an error at spec.expirationTimestamp, got %v", errs)
	}
	tok.Spec.ExpirationSeconds = proto.Int64(3600)
	p.PrepareCreate(ctx, tok)
	token = tok.GetStatus().GetToken()
	if got := tok.GetSpec().GetExpirationTimestamp().AsTime(); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("expirationSeconds 3600: want expiry %s, got %s", now.Add(time.Hour), got)
	}
	if errs := p.Validate(ctx, nil, tok, nil); len(errs) != 0 {
		t.Errorf("valid user token: %v", errs)
	}
	reveal := p.Conceal(tok)
	if tok.GetStatus().GetToken() != "" {
		t.Fatal("the token is still in the object to store")
	}
	stored := proto.Clone(tok).(*authv1alpha1.AccessToken)
	if got := reveal(stored).(*authv1alpha1.AccessToken); got.GetStatus().GetToken() != token || stored.GetStatus().GetToken() != "" {
		t.Errorf("reveal: want the token in a copy, got %q (stored %q)", got.GetStatus().GetToken(), stored.GetStatus().GetToken())
	}

	next := proto.Clone(stored).(*authv1alpha1.AccessToken)
	next.Status = &authv1alpha1.AccessTokenStatus{TokenHash: "sha256:forged", Token: "x"}
	next.Spec.Description, next.Spec.Revoked = "new", true
	p.PrepareUpdate(next, stored)
	if !proto.Equal(next.GetStatus(), stored.GetStatus()) {
		t.Errorf("update: want the stored status kept, got %v", next.GetStatus())
	}
	if errs := p.Validate(ctx, nil, next, stored); len(errs) != 0 {
		t.Errorf("description and revoked: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		mutate func(s *authv1alpha1.AccessTokenSpec)
		field  string
	}{
		{"user", func(s *authv1alpha1.AccessTokenSpec) { s.User = "root" }, "spec.user"},
		{"groups", func(s *authv1alpha1.AccessTokenSpec) { s.Groups = []string{"system:masters"} }, "spec.groups"},
		{"expiry", func(s *authv1alpha1.AccessTokenSpec) { s.ExpirationTimestamp = timestamppb.New(now.Add(time.Minute)) }, "spec.expirationTimestamp"},
	} {
		bad := proto.Clone(stored).(*authv1alpha1.AccessToken)
		tc.mutate(bad.Spec)
		if errs := p.Validate(ctx, nil, bad, stored); len(errs) != 1 || errs[0].Field != tc.field {
			t.Errorf("changing %s: want an error at %s, got %v", tc.name, tc.field, errs)
		}
	}
	unrevoke := proto.Clone(next).(*authv1alpha1.AccessToken)
	unrevoke.Spec.Revoked = false
	if errs := p.Validate(ctx, nil, unrevoke, next); len(errs) != 1 || errs[0].Field != "spec.revoked" {
		t.Errorf("reinstating: want an error at spec.revoked, got %v", errs)
	}
}
