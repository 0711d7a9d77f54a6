package shoot

import (
	"context"
	"log/slog"
	"time"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// AddressExternal is the name of the advertised address the addresses controller owns: the shoot's kube-apiserver
// through the hub's tunnel listener, Trellis's public endpoint of every shoot (Gardener's "external", the public DNS
// name of the API server).
const AddressExternal = "external"

// AddressesConfig configures the advertised addresses controller (Trellis's own; docs/tunnels.md).
type AddressesConfig struct {
	// Workers is how many shoots are looked at at once (default 5).
	Workers int
	// External returns the URL of a shoot's kube-apiserver through the hub's tunnel listener; "" while the listener's
	// address is not known yet. Nil: the hub serves no tunnel listener, and the controller does not run.
	External func(project, shoot string) string
}

// addressesDigest: whether the shoot is scheduled and deleting, and its external address.
func addressesDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	return shootSeed(s) + deletionDigest(o) + "|" + externalAddress(s)
}

func shootSeed(s *corev1beta1.Shoot) string {
	if seed := s.GetStatus().GetSeedName(); seed != "" {
		return seed
	}
	return s.GetSpec().GetSeedName()
}

func externalAddress(s *corev1beta1.Shoot) string {
	for _, a := range s.GetStatus().GetAdvertisedAddresses() {
		if a.GetName() == AddressExternal {
			return a.GetUrl()
		}
	}
	return ""
}

// addressesReconciler keeps the external advertised address of scheduled shoots.
type addressesReconciler struct {
	c        *collections
	external func(project, shoot string) string
	log      *slog.Logger
}

// Reconcile sets status.advertisedAddresses[name=external] of a scheduled shoot that is not being deleted to the
// tunnel's URL, first in the list; the shoot's other addresses stay as they are.
func (r *addressesReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.c.shoots, k)
	if err != nil || s == nil || shootSeed(s) == "" || s.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, err
	}
	project, err := r.projectOf(ctx, k.Namespace)
	if err != nil || project == "" {
		return controller.Result{}, err
	}
	url := r.external(project, k.Name)
	if url == "" {
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	if externalAddress(s) == url {
		return controller.Result{}, nil
	}
	_, err = updateShoot(ctx, r.c.shoots, k, true, func(cur *corev1beta1.Shoot) bool {
		if externalAddress(cur) == url {
			return false
		}
		if cur.Status == nil {
			cur.Status = &corev1beta1.ShootStatus{}
		}
		addrs := []*corev1beta1.ShootAdvertisedAddress{{Name: AddressExternal, Url: url}}
		for _, a := range cur.Status.AdvertisedAddresses {
			if a.GetName() != AddressExternal {
				addrs = append(addrs, a)
			}
		}
		cur.Status.AdvertisedAddresses = addrs
		r.log.Debug("advertising the tunnel address", "shoot", k.String(), "url", url)
		return true
	})
	return controller.Result{}, err
}

// projectOf returns the name of the project whose namespace is ns, "" when there is none.
func (r *addressesReconciler) projectOf(ctx context.Context, ns string) (string, error) {
	res, err := r.c.projects.List(ctx, "", store.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, o := range res.Items {
		if o.(*corev1beta1.Project).GetSpec().GetNamespace() == ns {
			return o.GetMetadata().GetName(), nil
		}
	}
	return "", nil
}
