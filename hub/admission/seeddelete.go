package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// validateSeedDelete refuses the deletion of a Seed that shoots still use (spec.seedName or status.seedName), as
// Gardener's SeedValidator admission plugin does: the deletion of a ManagedSeed, which deletes its Seed, waits until
// its shoots are gone or moved.
func validateSeedDelete(ctx context.Context, r Reader, s *corev1beta1.Seed) error {
	name := s.GetMetadata().GetName()
	list, err := r.List(ctx, shoots, "")
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("could not list the shoots of seed %s: %w", name, err))
	}
	var users []string
	for _, o := range list {
		sh, ok := o.(*corev1beta1.Shoot)
		if ok && (sh.GetSpec().GetSeedName() == name || sh.GetStatus().GetSeedName() == name) {
			users = append(users, sh.GetMetadata().GetNamespace()+"/"+sh.GetMetadata().GetName())
		}
	}
	if len(users) == 0 {
		return nil
	}
	slices.Sort(users)
	if len(users) > 5 {
		users = append(users[:5], fmt.Sprintf("and %d more", len(users)-5))
	}
	return apierrors.NewForbidden(seeds, name,
		fmt.Errorf("cannot delete seed %s which is still used by shoot(s): %s", name, strings.Join(users, ", ")))
}
