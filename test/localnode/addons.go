package localnode

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/test/timescale"
)

//go:embed addons.yaml
var addonsYAML string

var addonsTemplate = template.Must(template.New("addons").Option("missingkey=error").Parse(addonsYAML))

// deployAddons applies CoreDNS and local-path-provisioner and waits for both Deployments to be available.
func (n *Node) deployAddons(ctx context.Context) error {
	values := map[string]string{"DNSIP": n.cfg.Slot.DNSIP.String(),
		"StoragePath": filepath.Join(n.cfg.Slot.StateDir(), "storage")}
	for key, image := range map[string]string{"CoreDNS": "coredns", "LocalPath": "local-path-provisioner", "Busybox": "busybox"} {
		ref, err := ImageRef(n.cfg.Testbin, image)
		if err != nil {
			return err
		}
		values[key] = ref
	}
	// A ClusterIP cannot change: kube-dns of an earlier run in another slot goes first.
	svc, err := n.client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err == nil && svc.Spec.ClusterIP != values["DNSIP"] {
		if err := n.client.CoreV1().Services("kube-system").Delete(ctx, "kube-dns", metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete kube-dns of an earlier run: %w", err)
		}
	}
	var manifest bytes.Buffer
	if err := addonsTemplate.Execute(&manifest, values); err != nil {
		return fmt.Errorf("add-ons: %w", err)
	}
	if err := n.apply(ctx, manifest.Bytes()); err != nil {
		return fmt.Errorf("add-ons: %w", err)
	}
	for _, d := range []struct{ ns, name string }{{"kube-system", "coredns"}, {"local-path-storage", "local-path-provisioner"}} {
		if err := n.waitAvailable(ctx, d.ns, d.name); err != nil {
			return err
		}
	}
	return nil
}

// apply server-side applies every object of a multi-document YAML manifest.
func (n *Node) apply(ctx context.Context, manifest []byte) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(n.cfg.Kubeconfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(n.client.Discovery()))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if obj.Object == nil {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			r = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := r.Apply(ctx, obj.GetName(), &obj, metav1.ApplyOptions{FieldManager: "trellis-localnode", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// waitAvailable waits for a Deployment to have all its replicas updated and available.
func (n *Node) waitAvailable(ctx context.Context, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, timescale.Scale(startTimeout))
	defer cancel()
	var d *appsv1.Deployment
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := n.exited(); err != nil {
			return false, err
		}
		var err error
		if d, err = n.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		if !DeploymentAvailable(d) {
			return false, nil
		}
		// A seed restarted on its data has the last run's status: its pods must be ready on this node.
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return false, err
		}
		pods, err := n.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name && p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			}
		}
		return ready >= int(ptr.Deref(d.Spec.Replicas, 1)), nil
	})
	if err != nil {
		status := "not found"
		if d != nil {
			status = fmt.Sprintf("%d/%d available", d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1))
		}
		return fmt.Errorf("deployment %s/%s not available (%s): %w", ns, name, status, err)
	}
	return nil
}

// DeploymentAvailable reports whether a Deployment's current generation is rolled out and all replicas available.
func DeploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
