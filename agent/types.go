package agent

import (
	// The hub sends assignments as google.protobuf.Any; the cache resolves them through the global registry, so
	// every kind the hub may assign is linked in here.
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)
