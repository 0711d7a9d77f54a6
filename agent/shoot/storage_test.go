package shoot

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// TestLocalStorage: a shoot of provider type local with workers gets local-path-provisioner and the default
// StorageClass "standard" (Gardener's provider-local), applied into a real kube-apiserver twice without change: the
// images are the vector's, the volumes lie under the shoot's own directory of the machines. Workerless shoots and
// shoots of other providers get none.
func TestLocalStorage(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *corev1beta1.ShootSpec
		want bool
	}{
		{"local with workers", &corev1beta1.ShootSpec{Provider: &corev1beta1.Provider{Type: "local", Workers: []*corev1beta1.Worker{{Name: "w"}}}}, true},
		{"local workerless", &corev1beta1.ShootSpec{Provider: &corev1beta1.Provider{Type: "local"}}, false},
		{"another provider", &corev1beta1.ShootSpec{Provider: &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "w"}}}}, false},
	} {
		if got := testOperation(tc.spec).localStorage(); got != tc.want {
			t.Errorf("%s: localStorage %v, want %v", tc.name, got, tc.want)
		}
	}
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	seed := seedtest.StartShared(t)
	ctx := context.Background()
	v, err := imagevector.Parse([]byte("images:\n- name: local-path-provisioner\n  repository: local.trellis.dev/local-path-provisioner\n  tag: v0.0.30\n" +
		"- name: local-path-helper\n  repository: local.trellis.dev/busybox\n  tag: \"1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	op := testOperation(&corev1beta1.ShootSpec{Kubernetes: &corev1beta1.Kubernetes{Version: "1.31.1"},
		Provider: &corev1beta1.Provider{Type: "local", Workers: []*corev1beta1.Worker{{Name: "w"}}}})
	op.shoot.Metadata = &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s", Uid: "3f6c"}
	op.c.cfg.Images = v
	for range 2 {
		if err := op.applyLocalStorage(ctx, seed.Client); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := seed.Client.StorageV1().StorageClasses().Get(ctx, storageClassStandard, kmetav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || sc.Provisioner != "rancher.io/local-path" ||
		sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != "WaitForFirstConsumer" {
		t.Errorf("StorageClass %s: annotations %v, provisioner %s, binding %v", sc.Name, sc.Annotations, sc.Provisioner, sc.VolumeBindingMode)
	}
	d, err := seed.Client.AppsV1().Deployments("kube-system").Get(ctx, localPathProvisioner, kmetav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "local.trellis.dev/local-path-provisioner:v0.0.30" {
		t.Errorf("provisioner image %s", img)
	}
	if d.Generation != 1 {
		t.Errorf("the second apply changed the Deployment: generation %d", d.Generation)
	}
	cm, err := seed.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, localPathConfig, kmetav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		NodePathMap []struct {
			Node  string   `json:"node"`
			Paths []string `json:"paths"`
		} `json:"nodePathMap"`
	}
	if err := json.Unmarshal([]byte(cm.Data["config.json"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodePathMap) != 1 || len(cfg.NodePathMap[0].Paths) != 1 || cfg.NodePathMap[0].Paths[0] != "/var/lib/local-path-provisioner/3f6c" {
		t.Errorf("config.json %s, want the shoot's directory /var/lib/local-path-provisioner/3f6c", cm.Data["config.json"])
	}
	if !strings.Contains(cm.Data["helperPod.yaml"], "image: local.trellis.dev/busybox:1") {
		t.Errorf("helper pod %s, want the vector's local-path-helper", cm.Data["helperPod.yaml"])
	}
	for _, name := range []string{"setup", "teardown"} {
		if !strings.Contains(cm.Data[name], "$VOL_DIR") {
			t.Errorf("%s script %q", name, cm.Data[name])
		}
	}
	if _, err := seed.Client.RbacV1().RoleBindings("kube-system").Get(ctx, localPathRole, kmetav1.GetOptions{}); err != nil {
		t.Errorf("the helper pods' RoleBinding: %v", err)
	}
}
