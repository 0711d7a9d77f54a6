package kjson

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"k8s.io/apimachinery/pkg/api/resource"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// quantitiesDesc is kjsontest.Quantities, a dynamic test message with fields marked (trellis.meta.v1.quantity) of
// every shape (string, optional string, repeated string, map value) next to unmarked ones. Its options are built
// with the extension set, except for q_unknown, whose option sits in the unknown fields (as when a descriptor is
// built without the extension known).
var quantitiesDesc = buildQuantities()

func newQuantities() *dynamicpb.Message { return dynamicpb.NewMessage(quantitiesDesc) }

func buildQuantities() protoreflect.MessageDescriptor {
	kb := &kitchenBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("Quantities")}}
	marked := func() *descriptorpb.FieldOptions {
		opts := &descriptorpb.FieldOptions{}
		proto.SetExtension(opts, metav1.E_Quantity, true)
		return opts
	}
	kb.add("q", tString, "", false).Options = marked()
	kb.optional("opt_q", tString)
	kb.msg.Field[len(kb.msg.Field)-1].Options = marked()
	kb.add("qs", tString, "", true).Options = marked()
	kb.mapField("q_map", tString, tString, "")
	kb.msg.Field[len(kb.msg.Field)-1].Options = marked()
	kb.add("plain", tString, "", false)
	kb.mapField("plain_map", tString, tString, "")
	kb.add("not_marked", tString, "", false).Options = func() *descriptorpb.FieldOptions {
		opts := &descriptorpb.FieldOptions{}
		proto.SetExtension(opts, metav1.E_Quantity, false)
		return opts
	}()
	// The option as unknown fields: marshalled with the extension, read back without it.
	b, err := proto.Marshal(marked())
	if err != nil {
		panic(err)
	}
	unknown := &descriptorpb.FieldOptions{}
	if err := (proto.UnmarshalOptions{Resolver: new(protoregistry.Types)}).Unmarshal(b, unknown); err != nil {
		panic(err)
	}
	if len(unknown.ProtoReflect().GetUnknown()) == 0 {
		panic("quantity option not in the unknown fields")
	}
	kb.add("q_unknown", tString, "", false).Options = unknown
	for _, f := range kb.msg.NestedType { // the map entries of kitchenBuilder name the Kitchen
		for _, ff := range f.Field {
			if ff.TypeName != nil {
				ff.TypeName = proto.String(strings.Replace(*ff.TypeName, ".Kitchen.", ".Quantities.", 1))
			}
		}
	}
	for _, f := range kb.msg.Field {
		if f.TypeName != nil {
			f.TypeName = proto.String(strings.Replace(*f.TypeName, ".Kitchen.", ".Quantities.", 1))
		}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:        proto.String("kjsontest/quantities.proto"),
		Package:     proto.String("kjsontest"),
		Syntax:      proto.String("proto3"),
		Dependency:  []string{"trellis/meta/v1/options.proto"},
		MessageType: []*descriptorpb.DescriptorProto{kb.msg},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	return fd.Messages().ByName("Quantities")
}

// TestQuantityOption checks which fields the per-descriptor tables mark as quantities.
func TestQuantityOption(t *testing.T) {
	mi := getMessageInfo(quantitiesDesc)
	want := map[string]bool{"q": true, "optQ": true, "qs": true, "qMap": true, "plain": false, "plainMap": false,
		"notMarked": false, "qUnknown": true}
	for name, q := range want {
		if fi := mi.byName[name]; fi == nil || fi.quantity != q {
			t.Errorf("%s: quantity = %v, want %v", name, fi != nil && fi.quantity, q)
		}
	}
	// Generated messages: a few marked fields, and unmarked strings next to them.
	for _, tc := range []struct {
		msg   proto.Message
		field string
		want  bool
	}{
		{&corev1beta1.MachineType{}, "cpu", true},
		{&corev1beta1.MachineType{}, "name", false},
		{&corev1beta1.MachineTypeStorage{}, "size", true},
		{&corev1beta1.QuotaSpec{}, "metrics", true},
		{&corev1beta1.SeedStatus{}, "allocatable", true},
		{&corev1beta1.KubeletConfigReserved{}, "pid", true},
		{&corev1beta1.KubeletConfigEviction{}, "memoryAvailable", false}, // *string in Gardener: a quantity or a percentage
		{&corev1beta1.KubeletConfigEvictionMinimumReclaim{}, "memoryAvailable", true},
		{&corev1beta1.Volume{}, "size", false}, // a string in Gardener
		{&corev1beta1.Worker{}, "labels", false},
		{&seedmanagementv1alpha1.ResourceRequirements{}, "limits", true},
		{&metav1.ObjectMeta{}, "labels", false},
	} {
		fi := getMessageInfo(tc.msg.ProtoReflect().Descriptor()).byName[tc.field]
		if fi == nil || fi.quantity != tc.want {
			t.Errorf("%T.%s: quantity = %v, want %v", tc.msg, tc.field, fi != nil && fi.quantity, tc.want)
		}
	}
	// Marked plain strings and maps keep their Go-struct fast paths (TestQuantityNumbers runs them).
	for _, tc := range []struct {
		msg   proto.Message
		field string
	}{{&corev1beta1.MachineType{}, "cpu"}, {&corev1beta1.QuotaSpec{}, "metrics"}, {&corev1beta1.SeedStatus{}, "capacity"}} {
		m := tc.msg.ProtoReflect()
		mi := getMessageInfo(m.Descriptor())
		gl, base := mi.layout(m)
		if fi := mi.byName[tc.field]; gl.field(base, fi) == nil {
			t.Errorf("%T.%s has no fast path", tc.msg, tc.field)
		}
	}
}

// TestQuantityNumbers decodes numbers (and strings) into quantity fields of generated messages, whose plain strings
// and map<string, string> take the Go-struct fast paths, and of their dynamic copies, which take protoreflect's.
func TestQuantityNumbers(t *testing.T) {
	tests := []struct {
		name string
		msg  func() proto.Message
		in   string
		want string // the JSON written back
	}{
		{"machine type", func() proto.Message { return &corev1beta1.CloudProfile{} },
			`{"spec":{"machineTypes":[{"cpu":2,"gpu":0,"memory":"8Gi","name":"m","storage":{"size":20e9,"minSize":1.5}}],
				"volumeTypes":[{"name":"v","minSize":1e3}]}}`,
			`{"spec":{"machineTypes":[{"cpu":"2","gpu":"0","memory":"8Gi","name":"m","storage":{"size":"20e9","minSize":"1.5"}}],` +
				`"volumeTypes":[{"name":"v","minSize":"1e3"}]}}`},
		{"quota metrics", func() proto.Message { return &corev1beta1.Quota{} },
			`{"spec":{"metrics":{"cpu":200,"gpu":-1,"memory":"4000Gi","storage.standard":" 8000Gi "}}}`,
			`{"spec":{"metrics":{"cpu":"200","gpu":"-1","memory":"4000Gi","storage.standard":"8000Gi"}}}`},
		{"quantity map null is zero", func() proto.Message { return &corev1beta1.Quota{} },
			`{"spec":{"metrics":{"cpu":null}}}`, `{"spec":{"metrics":{"cpu":"0"}}}`},
		{"seed", func() proto.Message { return &corev1beta1.Seed{} },
			`{"spec":{"settings":{"excessCapacityReservation":{"configs":[{"resources":{"cpu":4,"memory":"16Gi"}}]},
				"verticalPodAutoscaler":{"enabled":true,"maxAllowed":{"cpu":8}}},"volume":{"minimumSize":20}},
				"status":{"capacity":{"shoots":250},"allocatable":{"shoots":249}}}`,
			`{"spec":{"volume":{"minimumSize":"20"},"settings":{"excessCapacityReservation":{"configs":[{"resources":{"cpu":"4","memory":"16Gi"}}]},` +
				`"verticalPodAutoscaler":{"enabled":true,"maxAllowed":{"cpu":"8"}}}},"status":{"capacity":{"shoots":"250"},"allocatable":{"shoots":"249"}}}`},
		{"shoot kubelet and autoscaling", func() proto.Message { return &corev1beta1.Shoot{} },
			`{"spec":{"kubernetes":{"kubelet":{"containerLogMaxSize":100,"evictionMinimumReclaim":{"memoryAvailable":0},
				"kubeReserved":{"cpu":0.1,"memory":"1Gi","ephemeralStorage":1e9,"pid":1000}},
				"kubeAPIServer":{"autoscaling":{"minAllowed":{"cpu":1}}},"verticalPodAutoscaler":{"maxAllowed":{"cpu":8,"memory":"32Gi"}}},
				"provider":{"workers":[{"name":"w","kubernetes":{"kubelet":{"kubeReserved":{"pid":20000}}},"volume":{"size":"20Gi"}}]}}}`,
			`{"spec":{"kubernetes":{"kubeAPIServer":{"autoscaling":{"minAllowed":{"cpu":"1"}}},` +
				`"kubelet":{"evictionMinimumReclaim":{"memoryAvailable":"0"},"kubeReserved":{"cpu":"0.1","memory":"1Gi","ephemeralStorage":"1e9","pid":"1000"},` +
				`"containerLogMaxSize":"100"},"verticalPodAutoscaler":{"maxAllowed":{"cpu":"8","memory":"32Gi"}}},` +
				`"provider":{"workers":[{"kubernetes":{"kubelet":{"kubeReserved":{"pid":"20000"}}},"name":"w","volume":{"size":"20Gi"}}]}}}`},
		{"gardenlet resources", func() proto.Message { return &seedmanagementv1alpha1.ManagedSeed{} },
			`{"spec":{"gardenlet":{"deployment":{"resources":{"requests":{"cpu":0.1,"memory":"100Mi"},"limits":{"cpu":2}},
				"env":[{"name":"X","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":1}}}]}}}}`,
			`{"spec":{"gardenlet":{"deployment":{"resources":{"limits":{"cpu":"2"},"requests":{"cpu":"0.1","memory":"100Mi"}},` +
				`"env":[{"name":"X","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1"}}}]}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := tt.msg()
			dyn := dynamicpb.NewMessage(gen.ProtoReflect().Descriptor())
			for _, m := range []proto.Message{gen, dyn} {
				if err := Unmarshal([]byte(tt.in), m); err != nil {
					t.Fatalf("%T: Unmarshal: %v", m, err)
				}
				out, err := Marshal(m)
				if err != nil {
					t.Fatalf("%T: Marshal: %v", m, err)
				}
				if string(out) != tt.want {
					t.Errorf("%T: wrote\n%s\nwant\n%s", m, out, tt.want)
				}
				// What is written reads back to the same message.
				again := m.ProtoReflect().New().Interface()
				if err := Unmarshal(out, again); err != nil || !proto.Equal(m, again) {
					t.Errorf("%T: output does not read back: %v", m, err)
				}
			}
		})
	}
	// The stored value is the number's literal text.
	var cp corev1beta1.CloudProfile
	if err := Unmarshal([]byte(`{"spec":{"machineTypes":[{"cpu":2,"memory":1.5,"gpu":1e3}]}}`), &cp); err != nil {
		t.Fatal(err)
	}
	if mt := cp.Spec.MachineTypes[0]; mt.Cpu != "2" || mt.Memory != "1.5" || mt.Gpu != "1e3" {
		t.Errorf("machine type = %v", mt)
	}
}

// TestQuantityDynamic covers every field shape on the dynamic test message (protoreflect paths, lists included).
func TestQuantityDynamic(t *testing.T) {
	m := newQuantities()
	in := `{"q":2,"optQ":0,"qs":[1,null,"3Gi",-1.5e-3],"qMap":{"a":1E3,"b":null},"plain":"x","plainMap":{"k":"v"},"qUnknown":5}`
	if err := Unmarshal([]byte(in), m); err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"q":"2","optQ":"0","qs":["1","0","3Gi","-1.5e-3"],"qMap":{"a":"1E3","b":"0"},"plain":"x","plainMap":{"k":"v"},"qUnknown":"5"}`
	if string(out) != want {
		t.Errorf("wrote\n%s\nwant\n%s", out, want)
	}
}

// TestQuantityErrors: numbers stay errors for other strings, and invalid quantities are errors naming the field.
func TestQuantityErrors(t *testing.T) {
	shoot := func() proto.Message { return &corev1beta1.Shoot{} }
	cloudProfile := func() proto.Message { return &corev1beta1.CloudProfile{} }
	quota := func() proto.Message { return &corev1beta1.Quota{} }
	quantities := func() proto.Message { return newQuantities() }
	tests := []struct {
		name string
		in   string
		msg  func() proto.Message
		want string
		path string
	}{
		{"number for plain string", `{"plain":2}`, quantities, `plain: expected a string, got number`, "plain"},
		{"number for plain map value", `{"plainMap":{"a":2}}`, quantities, `plainMap[a]: expected a string, got number`, "plainMap[a]"},
		{"number for option set false", `{"notMarked":2}`, quantities, `notMarked: expected a string, got number`, "notMarked"},
		{"number for machine type name", `{"spec":{"machineTypes":[{"name":2}]}}`, cloudProfile,
			`spec.machineTypes[0].name: expected a string, got number`, "spec.machineTypes[0].name"},
		{"number for worker volume size (a string in Gardener)", `{"spec":{"provider":{"workers":[{"volume":{"size":20}}]}}}`, shoot,
			`spec.provider.workers[0].volume.size: expected a string, got number`, "spec.provider.workers[0].volume.size"},
		{"number for eviction threshold (quantity or percentage)", `{"spec":{"kubernetes":{"kubelet":{"evictionHard":{"memoryAvailable":100}}}}}`, shoot,
			`spec.kubernetes.kubelet.evictionHard.memoryAvailable: expected a string, got number`, "spec.kubernetes.kubelet.evictionHard.memoryAvailable"},
		{"number for labels", `{"metadata":{"labels":{"a":1}}}`, quota, `metadata.labels[a]: expected a string, got number`, "metadata.labels[a]"},
		{"invalid quantity", `{"spec":{"kubernetes":{"kubelet":{"kubeReserved":{"cpu":"two"}}}}}`, shoot,
			`spec.kubernetes.kubelet.kubeReserved.cpu: ` + resource.ErrFormatWrong.Error(), "spec.kubernetes.kubelet.kubeReserved.cpu"},
		{"invalid quantity in a worker", `{"spec":{"provider":{"workers":[{"kubernetes":{"kubelet":{"kubeReserved":{"memory":"1Gb"}}}}]}}}`, shoot,
			`spec.provider.workers[0].kubernetes.kubelet.kubeReserved.memory: ` + resource.ErrFormatWrong.Error(),
			"spec.provider.workers[0].kubernetes.kubelet.kubeReserved.memory"},
		{"invalid quantity fast path", `{"spec":{"machineTypes":[{"name":"m","cpu":"2 cores"}]}}`, cloudProfile,
			`spec.machineTypes[0].cpu: ` + resource.ErrFormatWrong.Error(), "spec.machineTypes[0].cpu"},
		{"empty quantity", `{"spec":{"machineTypes":[{"cpu":""}]}}`, cloudProfile,
			`spec.machineTypes[0].cpu: ` + resource.ErrFormatWrong.Error(), "spec.machineTypes[0].cpu"},
		{"invalid quantity in a map", `{"spec":{"metrics":{"cpu":"200","memory":"lots"}}}`, quota,
			`spec.metrics[memory]: ` + resource.ErrFormatWrong.Error(), "spec.metrics[memory]"},
		{"number out of quantity range", `{"spec":{"metrics":{"cpu":1e99999999999999999999}}}`, quota,
			`spec.metrics[cpu]: ` + resource.ErrSuffix.Error(), "spec.metrics[cpu]"},
		{"escaped quantity", `{"spec":{"metrics":{"cpu":"\u0032"}}}`, quota,
			`spec.metrics[cpu]: ` + resource.ErrFormatWrong.Error(), "spec.metrics[cpu]"},
		{"bool for quantity", `{"spec":{"metrics":{"cpu":true}}}`, quota,
			`spec.metrics[cpu]: expected a quantity (a string or a number), got boolean`, "spec.metrics[cpu]"},
		{"object for quantity", `{"spec":{"machineTypes":[{"cpu":{}}]}}`, cloudProfile,
			`spec.machineTypes[0].cpu: expected a quantity (a string or a number), got object`, "spec.machineTypes[0].cpu"},
		{"invalid list element", `{"qs":["1",[]]}`, quantities, `qs[1]: expected a quantity (a string or a number), got array`, "qs[1]"},
		{"invalid optional", `{"optQ":"1.2.3"}`, quantities, `optQ: ` + resource.ErrFormatWrong.Error(), "optQ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []proto.Message{tt.msg()}
			if _, ok := msgs[0].(*dynamicpb.Message); !ok {
				msgs = append(msgs, dynamicpb.NewMessage(msgs[0].ProtoReflect().Descriptor()))
			}
			for _, m := range msgs {
				err := Unmarshal([]byte(tt.in), m)
				if err == nil {
					t.Fatalf("%T: Unmarshal succeeded, want %q", m, tt.want)
				}
				if err.Error() != tt.want {
					t.Errorf("%T: error\n got %s\nwant %s", m, err, tt.want)
				}
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Path != tt.path {
					t.Errorf("%T: FieldError = %#v, want path %q", m, fe, tt.path)
				}
			}
		})
	}
}

// TestQuantityProbe checks that quantityProbe keeps resource.ParseQuantity's verdict: every short text over an
// alphabet of quantity characters, and random longer ones, probed with the tightest bounds, get the same error (or
// none) as the text itself.
func TestQuantityProbe(t *testing.T) {
	const alphabet = "0019.+-eEikKmMGPu x"
	same := func(s string) {
		_, want := resource.ParseQuantity(s)
		p := quantityProbe(s, 1, 1)
		if _, got := resource.ParseQuantity(p); got != want {
			t.Errorf("%q: ParseQuantity error %v; probe %q gives %v", s, want, p, got)
		}
	}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		same(prefix)
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 4)
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, 5+r.IntN(20))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if s := string(b); quantityProbe(s, maxQuantityDigits, maxQuantityExponent) == s { // cheap to parse as it is
			same(s)
		}
	}
	for _, s := range []string{"1e-99", "1e-999", "123456789012345678901234567890e-5", "0.0000000000000000000000000001",
		"-00000000000000000000000000000000000.5Ki", "1e+1000", ".e-1000", "+e99999", "1.e-5000",
		"e4294967286", "-e-4294967306", "e4294967296", "1e4294967286", "e9223372036854775808", "e+0000000000000000000000001"} {
		same(s)
	}
}

// TestQuantityCost: texts that resource.ParseQuantity would take seconds or forever over are checked quickly.
func TestQuantityCost(t *testing.T) {
	for _, s := range []string{
		"1e-2147483648", "1e2147483648", "-1.5E-9223372036854775808", "1e-9999999",
		"0." + strings.Repeat("0", 1<<20) + "1", "1" + strings.Repeat("0", 1<<20) + "e-1048586",
		strings.Repeat("9", 1<<20) + "." + strings.Repeat("9", 1<<20), strings.Repeat("9", 1<<20) + "Ki",
	} {
		start := time.Now()
		if err := checkQuantity(s); err != nil {
			t.Errorf("%.20q...: %v", s, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.20q...: took %v", s, d)
		}
	}
	for _, s := range []string{"1e-99999999999999999999", "1e-2147483648x", strings.Repeat("9", 1<<20) + "Gb"} {
		if err := checkQuantity(s); err == nil {
			t.Errorf("%.20q... accepted", s)
		}
	}
	// Through the decoder, as a JSON number.
	start := time.Now()
	var q corev1beta1.Quota
	if err := Unmarshal([]byte(`{"spec":{"metrics":{"cpu":1e-2147483648}}}`), &q); err != nil || q.Spec.Metrics["cpu"] != "1e-2147483648" {
		t.Errorf("Unmarshal: %v, %v", err, q.Spec.Metrics)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Unmarshal took %v", d)
	}
}

// TestQuantityManifest reads a YAML manifest as Gardener's examples write quantities (numbers in YAML), e.g. the
// commented kubelet and VPA settings of 90-shoot.yaml.
func TestQuantityManifest(t *testing.T) {
	y := `apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata:
  name: crazy-botany
spec:
  kubernetes:
    kubelet:
      kubeReserved:
        cpu: 100m
        memory: 1Gi
        pid: 1000
      evictionHard:
        memoryAvailable: 100Mi
    verticalPodAutoscaler:
      maxAllowed:
        cpu: 8
        memory: 32Gi
`
	j, err := YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var shoot corev1beta1.Shoot
	if err := Unmarshal(j, &shoot); err != nil {
		t.Fatalf("Unmarshal(%s): %v", j, err)
	}
	out, err := Marshal(&shoot)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"crazy-botany"},"spec":{"kubernetes":` +
		`{"kubelet":{"evictionHard":{"memoryAvailable":"100Mi"},"kubeReserved":{"cpu":"100m","memory":"1Gi","pid":"1000"}},` +
		`"verticalPodAutoscaler":{"maxAllowed":{"cpu":"8","memory":"32Gi"}}}}}`
	if string(out) != want {
		t.Errorf("wrote\n%s\nwant\n%s", out, want)
	}
}
