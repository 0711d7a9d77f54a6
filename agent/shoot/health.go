package shoot

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// probeTimeout bounds each health probe of a shoot's kube-apiserver.
const probeTimeout = 5 * time.Second

// check is the agent's own verdict on one shoot condition.
type check struct {
	status          extensionsv1alpha1.ConditionStatus
	reason, message string
}

// ownChecks are the agent's checks of a shoot whose control plane runs in the seed, by condition type:
// APIServerAvailable from the kube-apiserver's /livez and /readyz (probed at its Service, as the hub's tunnels reach
// it), ControlPlaneHealthy from the ready replicas of etcd-main, etcd-events, kube-apiserver, kube-controller-manager and
// kube-scheduler, EveryNodeReady from the shoot's Nodes and SystemComponentsHealthy from the pods in the shoot's
// kube-system. It returns nil for a shoot without a control plane in the seed (a stand-in Service).
func (c *Controller) ownChecks(ctx context.Context, s *corev1beta1.Shoot, ns string) map[string]check {
	apiServer := &appsv1.Deployment{}
	if err := c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: deployKubeAPIServer}, apiServer); err != nil {
		return nil
	}
	hibernated := s.GetSpec().GetHibernation().GetEnabled()
	workers := len(s.GetSpec().GetProvider().GetWorkers()) > 0
	out := map[string]check{}

	var cs clientset
	api := check{status: extensionsv1alpha1.ConditionTrue, reason: "HealthzRequestSucceeded", message: "API server /livez and /readyz answer."}
	cfg, err := c.shootREST(ctx, ns)
	if err == nil {
		err = probe(ctx, cfg)
	}
	if err == nil {
		var hc *http.Client
		if hc, err = rest.HTTPClientFor(cfg); err == nil {
			// A shoot's client dials through the seed (cfg.Dial): client-go does not cache its transport, so its
			// connections are closed here rather than left idle for every care run.
			defer hc.CloseIdleConnections()
			cs, err = newClientset(cfg, hc)
		}
	}
	if err != nil {
		api = check{status: extensionsv1alpha1.ConditionFalse, reason: "HealthzRequestFailed", message: "API server not available: " + err.Error()}
		if hibernated {
			api.reason, api.message = "ShootHibernated", "The shoot is hibernated: its API server is scaled to zero."
		}
		cs = nil
	}
	out[extensionsv1alpha1.ShootAPIServerAvailable] = api

	cp := check{status: extensionsv1alpha1.ConditionTrue, reason: "ControlPlaneRunning", message: "etcd, kube-apiserver and its controllers are ready."}
	if hibernated {
		cp.reason, cp.message = "ControlPlaneHibernated", "The shoot is hibernated: its control plane is scaled to zero."
	} else {
		var problems []string
		objs := []client.Object{&appsv1.StatefulSet{}, &appsv1.StatefulSet{}, &appsv1.Deployment{}, &appsv1.Deployment{}}
		names := []string{etcdMain, etcdEvents, deployKubeAPIServer, deployKCM}
		if workers {
			objs, names = append(objs, &appsv1.Deployment{}), append(names, deployScheduler)
		}
		for i, o := range objs {
			if err := c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[i]}, o); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", names[i], err))
				continue
			}
			if ok, why := ready(o); !ok {
				problems = append(problems, names[i]+": "+why)
			}
		}
		if len(problems) > 0 {
			cp = check{status: extensionsv1alpha1.ConditionFalse, reason: "DeploymentUnhealthy", message: strings.Join(problems, "; ")}
		}
	}
	out[extensionsv1alpha1.ShootControlPlaneHealthy] = cp

	unknown := func(what string) check {
		return check{status: extensionsv1alpha1.ConditionUnknown, reason: "APIServerDown", message: "Cannot check " + what + ": the shoot's API server is not available."}
	}
	switch {
	case hibernated:
		out[extensionsv1alpha1.ShootSystemComponentsHealthy] = check{status: extensionsv1alpha1.ConditionTrue, reason: "ShootHibernated", message: "The shoot is hibernated."}
		if workers {
			out[extensionsv1alpha1.ShootEveryNodeReady] = check{status: extensionsv1alpha1.ConditionTrue, reason: "ShootHibernated", message: "The shoot is hibernated: it has no nodes."}
		}
	case cs == nil:
		out[extensionsv1alpha1.ShootSystemComponentsHealthy] = unknown("the system components")
		if workers {
			out[extensionsv1alpha1.ShootEveryNodeReady] = unknown("the nodes")
		}
	default:
		out[extensionsv1alpha1.ShootSystemComponentsHealthy] = systemComponents(ctx, cs, s)
		if workers {
			out[extensionsv1alpha1.ShootEveryNodeReady] = nodesReady(ctx, cs.CoreV1(), s)
		}
	}
	return out
}

// probe asks the kube-apiserver for /livez and /readyz.
func probe(ctx context.Context, cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	for _, path := range []string{"/livez", "/readyz"} {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		req, err := http.NewRequestWithContext(pctx, http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := hc.Do(req)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
		}
	}
	return nil
}

// systemComponents checks what the agent deployed into the shoot, as Gardener's care checks the ManagedResources of
// the system components: for a shoot with workers the kube-proxy DaemonSet of every worker pool and the CoreDNS
// Deployment (and local-path-provisioner's in a shoot of provider type local) rolled out and ready (Progressing while
// a rollout is under way, False when a pod is not ready), and every pod of the shoot's kube-system running and ready.
func systemComponents(ctx context.Context, cs clientset, s *corev1beta1.Shoot) check {
	var progressing, bad []string
	judge := func(name string, o client.Object, err error) {
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			return
		}
		ok, why := ready(o)
		switch {
		case ok:
		case rollingOut(o):
			progressing = append(progressing, name+": "+why)
		default:
			bad = append(bad, name+": "+why)
		}
	}
	workers := s.GetSpec().GetProvider().GetWorkers()
	if len(workers) > 0 {
		d, err := cs.AppsV1().Deployments(kmetav1.NamespaceSystem).Get(ctx, coreDNS, kmetav1.GetOptions{})
		judge("Deployment "+coreDNS, d, err)
		if s.GetSpec().GetProvider().GetType() == providerLocal {
			d, err := cs.AppsV1().Deployments(kmetav1.NamespaceSystem).Get(ctx, localPathProvisioner, kmetav1.GetOptions{})
			judge("Deployment "+localPathProvisioner, d, err)
		}
		for _, w := range workers {
			name := kubeProxyDaemonSetName(w.GetName())
			ds, err := cs.AppsV1().DaemonSets(kmetav1.NamespaceSystem).Get(ctx, name, kmetav1.GetOptions{})
			judge("DaemonSet "+name, ds, err)
		}
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, kmetav1.ListOptions{})
	if err != nil {
		return check{status: extensionsv1alpha1.ConditionUnknown, reason: "SystemComponentsUnknown", message: err.Error()}
	}
	var notReady []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
			notReady = append(notReady, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
		}
	}
	if len(notReady) > 0 {
		slices.Sort(notReady)
		bad = append(bad, "not ready in kube-system: "+strings.Join(notReady, ", "))
	}
	switch {
	case len(bad) > 0:
		return check{status: extensionsv1alpha1.ConditionFalse, reason: "SystemComponentsUnhealthy", message: strings.Join(append(bad, progressing...), "; ")}
	case len(progressing) > 0:
		return check{status: extensionsv1alpha1.ConditionProgressing, reason: "SystemComponentsRollingOut", message: strings.Join(progressing, "; ")}
	}
	msg := fmt.Sprintf("All %d pods in the shoot's kube-system are ready.", len(pods.Items))
	if len(workers) > 0 {
		storage := ""
		if s.GetSpec().GetProvider().GetType() == providerLocal {
			storage = ", local-path-provisioner"
		}
		msg = fmt.Sprintf("kube-proxy of %d worker pools, CoreDNS%s and all %d pods in the shoot's kube-system are ready.", len(workers), storage, len(pods.Items))
	}
	return check{status: extensionsv1alpha1.ConditionTrue, reason: "SystemComponentsRunning", message: msg}
}

// rollingOut reports whether a Deployment or DaemonSet is still rolling out its latest spec while its older pods
// serve (Gardener: a ManagedResource Progressing).
func rollingOut(obj client.Object) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Status.ObservedGeneration < o.Generation || o.Status.UpdatedReplicas < ptrValue(o.Spec.Replicas, 1) ||
			o.Status.Replicas > ptrValue(o.Spec.Replicas, 1)
	case *appsv1.DaemonSet:
		return o.Status.ObservedGeneration < o.Generation || o.Status.UpdatedNumberScheduled < o.Status.DesiredNumberScheduled
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodesReady checks the shoot's Nodes: every one Ready, and at least the worker pools' minimum of them.
func nodesReady(ctx context.Context, cs corev1client.CoreV1Interface, s *corev1beta1.Shoot) check {
	nodes, err := cs.Nodes().List(ctx, kmetav1.ListOptions{})
	if err != nil {
		return check{status: extensionsv1alpha1.ConditionUnknown, reason: "NodesUnknown", message: err.Error()}
	}
	var want int32
	for _, w := range s.GetSpec().GetProvider().GetWorkers() {
		want += w.GetMinimum()
	}
	var notReady []string
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		if !ready {
			notReady = append(notReady, n.Name)
		}
	}
	switch {
	case len(notReady) > 0:
		return check{status: extensionsv1alpha1.ConditionFalse, reason: "NodeUnhealthy", message: "Nodes not ready: " + strings.Join(notReady, ", ")}
	case int32(len(nodes.Items)) < want:
		return check{status: extensionsv1alpha1.ConditionFalse, reason: "MissingNodes",
			message: fmt.Sprintf("%d nodes registered, the worker pools' minimum is %d.", len(nodes.Items), want)}
	}
	return check{status: extensionsv1alpha1.ConditionTrue, reason: "EveryNodeReady", message: fmt.Sprintf("All %d nodes are ready.", len(nodes.Items))}
}
