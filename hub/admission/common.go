package admission

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/store"
)

type schemaGR = schema.GroupResource

// confirmDeletion refuses the deletion of an object not annotated confirmation.gardener.cloud/deletion=true,
// as Gardener does for Projects and Shoots.
func confirmDeletion[T store.Object](_ context.Context, _ Reader, obj T) error {
	md := obj.GetMetadata()
	if md.GetAnnotations()[AnnotationConfirmDeletion] == "true" {
		return nil
	}
	kind := string(obj.ProtoReflect().Descriptor().Name())
	return apierrors.NewForbidden(schema.GroupResource{Group: "core.gardener.cloud", Resource: kind}, md.GetName(),
		fmt.Errorf("%s %q must be annotated with %s=true before it can be deleted", kind, md.GetName(), AnnotationConfirmDeletion))
}
