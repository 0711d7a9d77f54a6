package admission_test

import (
	"github.com/trellis-dev/trellis/test/gardenerexamples"

	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/store"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// plugins is the hub's admission table, as the API server runs it.
var plugins = admission.Builtin()

// validationCase is one row of a table test: obj (defaulted first, as the server does) validated against old (nil on
// create) must fail with exactly the errors at paths, or pass when paths is empty.
type validationCase struct {
	name  string
	obj   store.Object
	old   store.Object
	paths []string
}

func runCases(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := validate(t, c.obj, c.old)
			got := errorPaths(errs)
			want := slices.Clone(c.paths)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("error paths:\n got  %q\n want %q\nerrors: %v", got, want, errs)
			}
		})
	}
}

// validate defaults obj and old as the server does (old was defaulted when it was written) and validates obj, without
// a Reader: the rules of the kinds tested with it read nothing.
func validate(t *testing.T, obj, old store.Object) field.ErrorList {
	t.Helper()
	return validateWith(t, nil, obj, old)
}

func validateWith(t *testing.T, r admission.Reader, obj, old store.Object) field.ErrorList {
	t.Helper()
	p := plugins.For(obj)
	if p.Validate == nil {
		t.Fatalf("%s has no validation", obj.ProtoReflect().Descriptor().FullName())
	}
	if p.Default != nil {
		p.Default(obj)
		if old != nil {
			p.Default(old)
		}
	}
	if old == nil {
		return p.Validate(context.Background(), r, obj, nil)
	}
	return p.Validate(context.Background(), r, obj, old)
}

func errorPaths(errs field.ErrorList) []string {
	paths := []string{}
	for _, e := range errs {
		paths = append(paths, e.Field)
	}
	slices.Sort(paths)
	return paths
}

// clone returns a deep copy of m, for variations of a valid object.
func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }

// with returns a copy of m changed by f.
func with[T proto.Message](m T, f func(T)) T {
	c := clone(m)
	f(c)
	return c
}

func meta(name, namespace string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: name, Namespace: namespace}
}

func ptr[T any](v T) *T { return &v }

// example is a Gardener example manifest decoded into its Trellis kind.
type example struct {
	name string // file/kind
	gr   schema.GroupResource
	obj  store.Object
}

// examples decodes every manifest of /work/shared/gardener/examples (../shared beside the repository) whose kind the
// Trellis protos model.
func examples(t testing.TB) []example {
	t.Helper()
	dir := gardenerexamples.Dir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Gardener examples in %s: %v", dir, err)
	}
	var out []example
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			j, err := kjson.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var m map[string]any
			if err := json.Unmarshal(j, &m); err != nil || m == nil {
				continue
			}
			av, _ := m["apiVersion"].(string)
			kind, _ := m["kind"].(string)
			msg, _ := gardenerexamples.KindMessage(av, kind).(store.Object)
			k, served := api.KindFor(av, kind)
			if msg == nil || !served {
				continue
			}
			j, err = json.Marshal(gardenerexamples.Fill(m))
			if err != nil {
				t.Fatal(err)
			}
			if err := kjson.Unmarshal(j, msg); err != nil {
				t.Fatalf("%s %s: %v", filepath.Base(f), kind, err)
			}
			out = append(out, example{name: filepath.Base(f) + "/" + kind, gr: k.GroupResource(), obj: msg})
		}
	}
	return out
}

// examplesOf returns the examples of the message type of zero.
func examplesOf(t testing.TB, zero store.Object) []store.Object {
	t.Helper()
	var out []store.Object
	for _, e := range examples(t) {
		if e.obj.ProtoReflect().Descriptor().FullName() == zero.ProtoReflect().Descriptor().FullName() {
			out = append(out, e.obj)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no example of %s", zero.ProtoReflect().Descriptor().FullName())
	}
	return out
}

// exampleReader serves the example objects to the admission checks that read (a Shoot's project, cloud profile and
// credentials binding).
type exampleReader []example

func (r exampleReader) Get(_ context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error) {
	for _, e := range r {
		if e.gr == gr && e.obj.GetMetadata().GetNamespace() == namespace && e.obj.GetMetadata().GetName() == name {
			return e.obj, nil
		}
	}
	return nil, apierrors.NewNotFound(gr, name)
}

func (r exampleReader) List(_ context.Context, gr schema.GroupResource, namespace string) ([]store.Object, error) {
	var out []store.Object
	for _, e := range r {
		if e.gr == gr && (namespace == "" || e.obj.GetMetadata().GetNamespace() == namespace) {
			out = append(out, e.obj)
		}
	}
	return out, nil
}

// TestGardenerExamplesValid defaults and validates every example manifest of a kind with validation, reading the
// other examples: Gardener's examples are valid objects.
func TestGardenerExamplesValid(t *testing.T) {
	n := 0
	all := examples(t)
	for _, e := range all {
		if plugins.For(e.obj).Validate == nil {
			continue
		}
		n++
		t.Run(e.name, func(t *testing.T) {
			// Gardener's example Bastion names a shoot, "example-shoot", the examples do not hold; admission wants it
			// to exist and be scheduled.
			if errs := validateWith(t, append(exampleReader(all), bastionShoot("example-shoot", "aws-1")), e.obj, nil); len(errs) > 0 {
				t.Errorf("example is invalid: %v", errs)
			}
		})
	}
	if n < 15 {
		t.Errorf("only %d examples validated", n)
	}
}
