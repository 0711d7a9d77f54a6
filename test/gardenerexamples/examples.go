package gardenerexamples

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"                    // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"               // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1" // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/coordination/v1" // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"         // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"        // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"          // kinds for KindMessage
	_ "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"    // kinds for KindMessage
)

// Dir returns the directory of Gardener's example manifests: $TRELLIS_SHARED/gardener/examples, or
// ../shared/gardener/examples beside the repository. A missing directory fails the test: CI has ../shared.
func Dir(t testing.TB) string {
	t.Helper()
	shared := os.Getenv("TRELLIS_SHARED")
	if shared == "" {
		wd, _ := os.Getwd()
		for d := wd; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				shared = filepath.Join(filepath.Dir(d), "shared")
				break
			}
		}
	}
	dir := filepath.Join(shared, "gardener", "examples")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Gardener's examples not found at %q (../shared beside the repository, or set TRELLIS_SHARED): %v", dir, err)
	}
	return dir
}

var (
	placeholder = regexp.MustCompile(`^<([^>]+)>$`)
	base64Call  = regexp.MustCompile(`^base64\((.*)\)$`)
)

// Fill replaces the examples' placeholders in a decoded manifest (in place) with concrete values of the right JSON
// type: provider names become "local", provider-specific configs an object, base64(...) its encoding, and so on.
func Fill(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = Fill(e)
		}
	case []any:
		for i, e := range x {
			x[i] = Fill(e)
		}
	case string:
		// The example shoot's worker volume type is not among the example cloud profile's (gp3, io1), which Gardener's
		// ShootValidator refuses.
		if x == "gp2" {
			return "gp3"
		}
		if m := base64Call.FindStringSubmatch(x); m != nil {
			return base64.StdEncoding.EncodeToString([]byte(m[1]))
		}
		m := placeholder.FindStringSubmatch(x)
		if m == nil {
			return x
		}
		switch p := m[1]; {
		case strings.Contains(p, "specific"):
			return map[string]any{"apiVersion": "local.provider.extensions.gardener.cloud/v1alpha1", "kind": "Config"}
		case strings.Contains(p, "provider-name"):
			return "local"
		case p == "some-image-name":
			return "gardenlinux"
		case p == "some-image-version":
			return "15.4.20220818"
		case strings.Contains(p, "network-extension"):
			return "calico"
		default:
			return "filled-" + strings.ReplaceAll(p, " ", "-")
		}
	}
	return v
}

// KindMessage returns a new Trellis message for a manifest's apiVersion and kind, or nil when Trellis has no such kind.
func KindMessage(apiVersion, kind string) proto.Message {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	var pkg string
	switch {
	case group == "":
		pkg = "trellis.kubernetes.core." + version
	case strings.HasSuffix(group, ".gardener.cloud"):
		pkg = "trellis." + strings.TrimSuffix(group, ".gardener.cloud") + "." + version
	case strings.HasSuffix(group, ".k8s.io"):
		pkg = "trellis.kubernetes." + strings.TrimSuffix(group, ".k8s.io") + "." + version
	default:
		return nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(pkg + "." + kind))
	if err != nil {
		return nil
	}
	return mt.New().Interface()
}
