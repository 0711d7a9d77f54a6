package api

import (
	"context"
	"slices"

	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kvalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/store"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// The options kinds kube-apiserver names when a write's options are invalid.
const (
	optionsCreate = "CreateOptions"
	optionsUpdate = "UpdateOptions"
	optionsPatch  = "PatchOptions"
	optionsDelete = "DeleteOptions"
)

// writer is a collection's writes, made for real (*store.Collection) or as dry runs (store.DryRun).
type writer interface {
	Create(ctx context.Context, obj store.Object) (store.Object, error)
	GuaranteedUpdate(ctx context.Context, namespace, name string, status bool, mutate func(cur store.Object) (store.Object, error)) (store.Object, error)
	DeleteFinalizing(ctx context.Context, namespace, name string, pre *metav1.Preconditions, finalize func([]string) []string) (store.Object, bool, error)
}

// writer returns the writes a request makes: dry runs when its metadata carries gateway.MetadataDryRun (the REST
// gateway's ?dryRun=). The values are validated as kube-apiserver validates the dryRun of a write's options
// (options names them: CreateOptions, ...): only "All" is valid, and anything else is 422 Invalid, worded as
// kube-apiserver words it.
func (s *Server[T, L, E, PE]) writer(ctx context.Context, options string) (writer, error) {
	dry, err := dryRun(ctx, options)
	if err != nil {
		return nil, err
	}
	if dry {
		return s.coll.DryRun(), nil
	}
	return s.coll, nil
}

// dryRun reports whether the request asks for a dry run, or why its dryRun option is invalid.
func dryRun(ctx context.Context, options string) (bool, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(gateway.MetadataDryRun)
	if errs := kvalidation.ValidateDryRun(field.NewPath("dryRun"), values); len(errs) > 0 {
		return false, apierrors.NewInvalid(schema.GroupKind{Group: kmetav1.GroupName, Kind: options}, "", errs)
	}
	return len(values) > 0, nil
}

// patchedDecoding is how a patched object is read by the patch's fieldValidation (gateway.MetadataFieldValidation):
// Strict (the default) refuses unknown fields; Ignore drops them; Warn drops them and names each in a warning of the
// answer (gateway.Warn), as kube-apiserver does.
func patchedDecoding(ctx context.Context) kjson.UnmarshalOptions {
	md, _ := metadata.FromIncomingContext(ctx)
	var o kjson.UnmarshalOptions
	for _, v := range md.Get(gateway.MetadataFieldValidation) {
		switch v {
		case "Ignore":
			o = gateway.LenientDecoding(true, nil)
		case "Warn":
			o = gateway.LenientDecoding(true, func(text string) { gateway.Warn(ctx, text) })
		}
	}
	return o
}

// Finalizers of deletion propagation, kube-apiserver's: the garbage collector removes them when it has orphaned
// (FinalizerOrphan) or deleted (FinalizerForeground) the object's dependents.
const (
	FinalizerOrphan     = kmetav1.FinalizerOrphanDependents
	FinalizerForeground = kmetav1.FinalizerDeleteDependents
)

// propagation returns how a delete sets the finalizers of deletion propagation, from its propagationPolicy
// (gateway.MetadataPropagationPolicy) as kube-apiserver's registry sets them: Orphan adds the orphan finalizer and
// drops foregroundDeletion, Foreground the reverse, Background drops both; no policy leaves the finalizers as they
// are (the kinds' default policy is Background).
func propagation(ctx context.Context) (func([]string) []string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(gateway.MetadataPropagationPolicy)
	if len(values) == 0 {
		return nil, nil
	}
	p := kmetav1.DeletionPropagation(values[0])
	var add, drop string
	switch p {
	case kmetav1.DeletePropagationOrphan:
		add, drop = FinalizerOrphan, FinalizerForeground
	case kmetav1.DeletePropagationForeground:
		add, drop = FinalizerForeground, FinalizerOrphan
	case kmetav1.DeletePropagationBackground:
	default:
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: kmetav1.GroupName, Kind: optionsDelete}, "", field.ErrorList{
			field.NotSupported(field.NewPath("propagationPolicy"), p, []string{string(kmetav1.DeletePropagationForeground), string(kmetav1.DeletePropagationBackground), string(kmetav1.DeletePropagationOrphan)})})
	}
	return func(fs []string) []string {
		fs = slices.DeleteFunc(fs, func(f string) bool {
			return f == drop || f == FinalizerOrphan && add == "" || f == FinalizerForeground && add == ""
		})
		if add != "" && !slices.Contains(fs, add) {
			fs = append(fs, add)
		}
		return fs
	}, nil
}
