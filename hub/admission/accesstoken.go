package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/auth"
	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
)

// issueAccessToken generates the token of a new AccessToken and records its ID and hash in the status (the request's
// status is replaced), and defaults spec.expirationTimestamp: from spec.expirationSeconds when set, else the
// configured default lifetime. The token stays in status.token until concealAccessToken takes it out before the
// object is stored.
func issueAccessToken(ctx context.Context, t *authv1alpha1.AccessToken) {
	token := auth.NewAccessToken()
	t.Status = &authv1alpha1.AccessTokenStatus{
		TokenId:   token[:auth.AccessTokenIDLength],
		TokenHash: auth.AccessTokenHash(token),
		Token:     token,
	}
	if t.Spec == nil {
		t.Spec = &authv1alpha1.AccessTokenSpec{}
	}
	cfg := configFrom(ctx)
	now := cfg.now().Truncate(time.Second) // timestamps are served with second precision, as metav1.Time's
	switch {
	case t.Spec.ExpirationSeconds != nil:
		t.Spec.ExpirationTimestamp = timestamppb.New(now.Add(time.Duration(t.Spec.GetExpirationSeconds()) * time.Second))
	case t.Spec.ExpirationTimestamp == nil:
		t.Spec.ExpirationTimestamp = timestamppb.New(now.Add(cfg.defaultLifetime()))
	}
}

// keepAccessTokenStatus keeps the status the hub wrote: nobody else writes it.
func keepAccessTokenStatus(t, old *authv1alpha1.AccessToken) {
	t.Status = proto.Clone(old.GetStatus()).(*authv1alpha1.AccessTokenStatus)
	if t.Status != nil {
		t.Status.Token = ""
	}
}

// concealAccessToken takes the token out of the AccessToken to be stored and puts it into the create's response.
func concealAccessToken(t *authv1alpha1.AccessToken) func(*authv1alpha1.AccessToken) *authv1alpha1.AccessToken {
	token := t.GetStatus().GetToken()
	if t.Status != nil {
		t.Status.Token = ""
	}
	return func(created *authv1alpha1.AccessToken) *authv1alpha1.AccessToken {
		out := proto.Clone(created).(*authv1alpha1.AccessToken)
		if out.Status == nil {
			out.Status = &authv1alpha1.AccessTokenStatus{}
		}
		out.Status.Token = token
		return out
	}
}

// validateAccessToken checks a user token (namespace trellis-system: spec.user, optional spec.groups) or a robot token
// (any other namespace: spec.serviceAccountName naming an existing ServiceAccount, whose uid it records), and its
// expiry: set, in the future, within the configured maximum lifetime. On update only spec.description and
// spec.revoked (false to true) may change.
func validateAccessToken(ctx context.Context, r Reader, t, old *authv1alpha1.AccessToken) field.ErrorList {
	p := field.NewPath("spec")
	spec := t.GetSpec()
	if old != nil {
		var errs field.ErrorList
		o := old.GetSpec()
		errs = append(errs, immutable(p.Child("user"), spec.GetUser(), o.GetUser())...)
		errs = append(errs, immutable(p.Child("groups"), strings.Join(spec.GetGroups(), ","), strings.Join(o.GetGroups(), ","))...)
		errs = append(errs, immutable(p.Child("serviceAccountName"), spec.GetServiceAccountName(), o.GetServiceAccountName())...)
		errs = append(errs, immutable(p.Child("expirationSeconds"), spec.GetExpirationSeconds(), o.GetExpirationSeconds())...)
		errs = append(errs, immutableMessage(p.Child("expirationTimestamp"), spec.GetExpirationTimestamp(), o.GetExpirationTimestamp())...)
		if o.GetRevoked() && !spec.GetRevoked() {
			errs = append(errs, field.Forbidden(p.Child("revoked"), "a revoked token cannot be reinstated"))
		}
		return errs
	}
	errs := validateTokenExpiry(configFrom(ctx), p, spec)
	if t.GetMetadata().GetNamespace() == auth.UserTokenNamespace {
		return append(errs, validateUserToken(p, spec)...)
	}
	return append(errs, admitRobotToken(ctx, r, p, t)...)
}

func validateTokenExpiry(cfg Config, p *field.Path, spec *authv1alpha1.AccessTokenSpec) field.ErrorList {
	var errs field.ErrorList
	if spec.ExpirationSeconds != nil && spec.GetExpirationSeconds() < 1 {
		errs = append(errs, field.Invalid(p.Child("expirationSeconds"), spec.GetExpirationSeconds(), "must be at least 1"))
	}
	now := cfg.now()
	exp := spec.GetExpirationTimestamp().AsTime()
	switch {
	case spec.GetExpirationTimestamp() == nil:
		errs = append(errs, field.Required(p.Child("expirationTimestamp"), "every token expires"))
	case !exp.After(now):
		errs = append(errs, field.Invalid(p.Child("expirationTimestamp"), exp.UTC().Format(time.RFC3339), "must be in the future"))
	case cfg.AccessTokenMaxLifetime > 0 && exp.Sub(now) > cfg.AccessTokenMaxLifetime:
		errs = append(errs, field.Invalid(p.Child("expirationTimestamp"), exp.UTC().Format(time.RFC3339),
			fmt.Sprintf("tokens may live at most %s", cfg.AccessTokenMaxLifetime)))
	}
	return errs
}

func validateUserToken(p *field.Path, spec *authv1alpha1.AccessTokenSpec) field.ErrorList {
	var errs field.ErrorList
	switch u := spec.GetUser(); {
	case u == "":
		errs = append(errs, field.Required(p.Child("user"), "a user token in "+auth.UserTokenNamespace+" names its user"))
	case strings.HasPrefix(u, auth.ServiceAccountUserPrefix):
		errs = append(errs, field.Invalid(p.Child("user"), u, "service accounts authenticate with robot tokens in their namespace"))
	}
	for i, g := range spec.GetGroups() {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, field.Invalid(p.Child("groups").Index(i), g, "must not be empty"))
		}
	}
	if spec.GetServiceAccountName() != "" {
		errs = append(errs, field.Forbidden(p.Child("serviceAccountName"), "user tokens in "+auth.UserTokenNamespace+" name no service account"))
	}
	return errs
}

// admitRobotToken checks a robot token's ServiceAccount and records its uid in the status.
func admitRobotToken(ctx context.Context, r Reader, p *field.Path, t *authv1alpha1.AccessToken) field.ErrorList {
	var errs field.ErrorList
	spec := t.GetSpec()
	if spec.GetUser() != "" {
		errs = append(errs, field.Forbidden(p.Child("user"), "only user tokens in "+auth.UserTokenNamespace+" name a user"))
	}
	if len(spec.GetGroups()) > 0 {
		errs = append(errs, field.Forbidden(p.Child("groups"), "a robot token's groups are its service account's"))
	}
	sp := p.Child("serviceAccountName")
	sa := spec.GetServiceAccountName()
	if sa == "" {
		return append(errs, field.Required(sp, "a robot token names a ServiceAccount of its namespace"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(sa) {
		errs = append(errs, field.Invalid(sp, sa, msg))
	}
	if len(errs) > 0 || r == nil {
		return errs
	}
	obj, err := r.Get(ctx, auth.ServiceAccounts, t.GetMetadata().GetNamespace(), sa)
	switch {
	case apierrors.IsNotFound(err):
		return field.ErrorList{field.NotFound(sp, sa)}
	case err != nil:
		return field.ErrorList{field.InternalError(sp, err)}
	case obj.GetMetadata().GetDeletionTimestamp() != nil:
		return field.ErrorList{field.Invalid(sp, sa, "the ServiceAccount is being deleted")}
	}
	if t.Status == nil {
		t.Status = &authv1alpha1.AccessTokenStatus{}
	}
	t.Status.ServiceAccountUid = obj.GetMetadata().GetUid()
	return nil
}
