package admission

import (
	"context"

	"google.golang.org/protobuf/proto"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

type specEqualKey struct{}

// specEqualMemo remembers that the spec of obj equals the spec of old, for one write's validation and admission.
type specEqualMemo struct {
	obj, old *corev1beta1.Shoot
}

// WithSpecComparison returns ctx for one validation and admission of a write (Plugin.Validate, then Plugin.Admit,
// of the same objects): a Shoot's spec found equal to the stored one by validation is not compared again by
// admission. Only equality is remembered, for the same two objects: validation changes a Shoot's spec (defaulting
// its Kubernetes version, adding its project's tolerations) only when it differs from the stored one, so a spec that
// differed is compared again.
func WithSpecComparison(ctx context.Context) context.Context {
	return context.WithValue(ctx, specEqualKey{}, &specEqualMemo{})
}

// shootSpecEqual reports whether the specs of s and old (not nil) are equal, remembering equality in ctx's memo
// (WithSpecComparison).
func shootSpecEqual(ctx context.Context, s, old *corev1beta1.Shoot) bool {
	m, _ := ctx.Value(specEqualKey{}).(*specEqualMemo)
	if m != nil && m.obj == s && m.old == old {
		return true
	}
	if !proto.Equal(s.GetSpec(), old.GetSpec()) {
		return false
	}
	if m != nil {
		m.obj, m.old = s, old
	}
	return true
}
