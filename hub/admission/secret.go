package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// defaultSecret folds the write-only stringData into data, as Kubernetes does, and defaults the type.
func defaultSecret(s *kcorev1.Secret) {
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	if s.Type == "" {
		s.Type = "Opaque"
	}
}

func validateSecret(_ context.Context, _ Reader, s, old *kcorev1.Secret) field.ErrorList {
	var errs field.ErrorList
	for k := range s.GetData() {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
	}
	if old != nil {
		if s.GetType() != old.GetType() {
			errs = append(errs, field.Invalid(field.NewPath("type"), s.GetType(), "field is immutable"))
		}
		if old.GetImmutable() {
			if !mapsEqualBytes(s.GetData(), old.GetData()) {
				errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
			}
			if !s.GetImmutable() {
				errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
			}
		}
	}
	return errs
}

func validateConfigMap(_ context.Context, _ Reader, c, old *kcorev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	for k := range c.GetData() {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
	}
	if old != nil && old.GetImmutable() {
		if len(c.GetData()) != len(old.GetData()) || !c.GetImmutable() {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		} else {
			for k, v := range old.GetData() {
				if c.GetData()[k] != v {
					errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
					break
				}
			}
		}
	}
	return errs
}

func mapsEqualBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}
