package accesstoken

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Name is the controller's name in --controllers.
const Name = "accesstoken"

// Config configures the controller.
type Config struct {
	Source  controller.Collections
	Workers int
	Log     *slog.Logger
}

// Reconciler deletes a robot AccessToken whose ServiceAccount is gone.
type Reconciler struct {
	Tokens, ServiceAccounts *store.Collection
	Log                     *slog.Logger
}

// New returns the controller for cfg.
func New(cfg Config) (*controller.Controller, error) {
	if cfg.Source == nil {
		return nil, errors.New("accesstoken: no source")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var tokens, sas *store.Collection
	if err := controller.OpenCollections(cfg.Source, Name, map[schema.GroupResource]**store.Collection{
		auth.AccessTokens: &tokens, auth.ServiceAccounts: &sas,
	}); err != nil {
		return nil, err
	}
	r := &Reconciler{Tokens: tokens, ServiceAccounts: sas, Log: cfg.Log.With("controller", Name)}
	return controller.New(controller.Config{Name: Name, Reconciler: r, Workers: cfg.Workers, Log: cfg.Log,
		Sources: []controller.Source{
			// A token's ServiceAccount and the uid it was issued for never change; created tokens are looked at once.
			{Collection: tokens, Digest: func(store.Object) string { return "" }},
			// A ServiceAccount that goes, or comes back as another, concerns the tokens issued for its name.
			{Collection: sas, Map: r.tokensOf, Digest: func(o store.Object) string { return o.GetMetadata().GetUid() }},
		}})
}

// tokensOf are the keys of the robot tokens issued for the ServiceAccount's name.
func (r *Reconciler) tokensOf(sa store.Object) []controller.Key {
	md := sa.GetMetadata()
	res, err := r.Tokens.List(context.Background(), md.GetNamespace(), store.ListOptions{})
	if err != nil {
		return nil
	}
	var keys []controller.Key
	for _, o := range res.Items {
		if t := o.(*authv1alpha1.AccessToken); t.GetSpec().GetServiceAccountName() == md.GetName() {
			keys = append(keys, controller.Key{Namespace: t.GetMetadata().GetNamespace(), Name: t.GetMetadata().GetName()})
		}
	}
	return keys
}

// Reconcile deletes the token key when it is a robot token whose ServiceAccount no longer exists as the one it was
// issued for.
func (r *Reconciler) Reconcile(ctx context.Context, key controller.Key) (controller.Result, error) {
	t, ok, err := controller.Get[*authv1alpha1.AccessToken](ctx, r.Tokens, key)
	if err != nil || !ok || key.Namespace == auth.UserTokenNamespace || t.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, err
	}
	name := t.GetSpec().GetServiceAccountName()
	if name == "" {
		return controller.Result{}, nil
	}
	sa, err := r.ServiceAccounts.Get(ctx, key.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return controller.Result{}, err
	case sa.GetMetadata().GetUid() == t.GetStatus().GetServiceAccountUid():
		return controller.Result{}, nil // its ServiceAccount is there
	}
	// The precondition keeps a token that was replaced meanwhile (same name, new uid) from being deleted unseen.
	pre := &metav1.Preconditions{Uid: proto.String(t.GetMetadata().GetUid())}
	if _, _, err := r.Tokens.Delete(ctx, key.Namespace, key.Name, pre); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return controller.Result{}, fmt.Errorf("delete access token %s of deleted service account %s: %w", key, name, err)
	}
	r.Log.Info("deleted the access token of a deleted service account", "token", key.String(), "serviceAccount", name)
	return controller.Result{}, nil
}
