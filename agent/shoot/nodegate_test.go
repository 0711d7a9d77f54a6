package shoot

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestCriticalNotReady: a node waits for the critical DaemonSets that place a pod on it (their node selector matches
// and they tolerate the taint) until each has a ready pod there; other pools' DaemonSets, DaemonSets that cannot run
// on a tainted node, and ready pods of other nodes or other owners do not count.
func TestCriticalNotReady(t *testing.T) {
	node := &corev1.Node{ObjectMeta: kmetav1.ObjectMeta{Name: "n1", Labels: map[string]string{labelWorkerPool: "a"}}}
	tolerateAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	ds := func(name, pool string, tolerations []corev1.Toleration) appsv1.DaemonSet {
		d := appsv1.DaemonSet{ObjectMeta: kmetav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID(name)}}
		d.Spec.Template.Spec.NodeSelector = map[string]string{labelWorkerPool: pool}
		d.Spec.Template.Spec.Tolerations = tolerations
		return d
	}
	pod := func(owner, nodeName string, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: kmetav1.ObjectMeta{Name: owner + "-x", OwnerReferences: []kmetav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: owner, UID: types.UID(owner), Controller: new(true)}}}}
		p.Spec.NodeName = nodeName
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	proxyA := ds("kube-proxy-a", "a", tolerateAll)
	for name, tc := range map[string]struct {
		sets []appsv1.DaemonSet
		pods []corev1.Pod
		want []string
	}{
		"no critical DaemonSets":        {},
		"kube-proxy has no pod yet":     {sets: []appsv1.DaemonSet{proxyA}, want: []string{"kube-system/kube-proxy-a"}},
		"kube-proxy's pod is not ready": {sets: []appsv1.DaemonSet{proxyA}, pods: []corev1.Pod{pod("kube-proxy-a", "n1", false)}, want: []string{"kube-system/kube-proxy-a"}},
		"kube-proxy's pod is ready":     {sets: []appsv1.DaemonSet{proxyA}, pods: []corev1.Pod{pod("kube-proxy-a", "n1", true)}},
		"ready on another node":         {sets: []appsv1.DaemonSet{proxyA}, pods: []corev1.Pod{pod("kube-proxy-a", "n2", true)}, want: []string{"kube-system/kube-proxy-a"}},
		"ready pod of another owner":    {sets: []appsv1.DaemonSet{proxyA}, pods: []corev1.Pod{pod("kube-proxy-b", "n1", true)}, want: []string{"kube-system/kube-proxy-a"}},
		"another pool's DaemonSet":      {sets: []appsv1.DaemonSet{ds("kube-proxy-b", "b", tolerateAll)}},
		"does not tolerate the taint":   {sets: []appsv1.DaemonSet{ds("agent", "a", nil)}},
		"tolerates the taint by key": {sets: []appsv1.DaemonSet{ds("csi", "a", []corev1.Toleration{{Key: TaintCriticalComponentsNotReady,
			Operator: corev1.TolerationOpExists}})}, want: []string{"kube-system/csi"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := criticalNotReady(node, tc.sets, tc.pods); !slices.Equal(got, tc.want) {
				t.Fatalf("criticalNotReady: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGatesNodes: the agent gates the Nodes of shoots with worker pools on its seed, neither hibernated nor being
// deleted.
func TestGatesNodes(t *testing.T) {
	shoot := func(edit func(*corev1beta1.Shoot)) *corev1beta1.Shoot {
		s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s"},
			Spec: &corev1beta1.ShootSpec{SeedName: proto.String("local"), Provider: &corev1beta1.Provider{
				Workers: []*corev1beta1.Worker{{Name: "a"}}}},
			Status: &corev1beta1.ShootStatus{SeedName: proto.String("local"), TechnicalId: "shoot--dev--s"}}
		if edit != nil {
			edit(s)
		}
		return s
	}
	for name, tc := range map[string]struct {
		shoot *corev1beta1.Shoot
		want  bool
	}{
		"workers on the seed": {shoot: shoot(nil), want: true},
		"gone":                {},
		"workerless":          {shoot: shoot(func(s *corev1beta1.Shoot) { s.Spec.Provider.Workers = nil })},
		"hibernated": {shoot: shoot(func(s *corev1beta1.Shoot) {
			s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: proto.Bool(true)}
		})},
		"being deleted":       {shoot: shoot(func(s *corev1beta1.Shoot) { s.Metadata.DeletionTimestamp = timestamppb.Now() })},
		"moving to another":   {shoot: shoot(func(s *corev1beta1.Shoot) { s.Spec.SeedName = proto.String("other") })},
		"not yet on the seed": {shoot: shoot(func(s *corev1beta1.Shoot) { s.Status.SeedName = nil })},
		"no namespace yet":    {shoot: shoot(func(s *corev1beta1.Shoot) { s.Status.TechnicalId = "" })},
	} {
		if got := gatesNodes(tc.shoot, "local"); got != tc.want {
			t.Errorf("%s: gatesNodes %v, want %v", name, got, tc.want)
		}
	}
}
