package admission

import "context"

type subresourceKey struct{}

// WithSubresource returns ctx saying that the write being admitted goes through a subresource ("binding"); the
// kinds' servers set it before Validate, since some rules depend on it (a Shoot's spec.seedName moves from one seed
// to another only through its binding subresource).
func WithSubresource(ctx context.Context, sub string) context.Context {
	return context.WithValue(ctx, subresourceKey{}, sub)
}

// Subresource returns the subresource the write being admitted goes through ("" for the object itself).
func Subresource(ctx context.Context) string {
	s, _ := ctx.Value(subresourceKey{}).(string)
	return s
}
