package shoot

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// TaintCriticalComponentsNotReady is Gardener's taint of a new Node (effect NoSchedule), which its kubelet registers
// with (the worker pools' kubelet configuration, oscSpec): until the node's critical components (the pods of
// DaemonSets labeled labelCriticalComponent, which tolerate it: kube-proxy) are ready, nothing else is scheduled
// there. Then the agent takes it off (gateNodes), as Gardener's resource manager does. Without it a new node started
// CoreDNS beside kube-proxy, CoreDNS's first connection to the kubernetes Service went out before kube-proxy had
// written the Service's rules, its connection tracking entry kept the retries from being translated, and CoreDNS
// waited for its client's 30 s dial timeout before it could answer: a new node's DNS was ready 30 s late.
const TaintCriticalComponentsNotReady = "node.gardener.cloud/critical-components-not-ready"

// labelCriticalComponent (value "true") marks the DaemonSets and pods of a node's critical components.
const labelCriticalComponent = "node.gardener.cloud/critical-component"

// Node gate timing: how often gateLoop looks for shoots to gate, how soon a gate looks again at a tainted node whose
// critical components are not ready yet, and the longest wait before it tries again after a failure (its first
// attempts fail until the flow has deployed the control plane).
const (
	nodeGateScan       = 2 * time.Second
	nodeGateRecheck    = time.Second
	nodeGateMaxBackoff = 5 * time.Second
	nodeGateCallLimit  = 10 * time.Second
)

// gatesNodes reports whether the agent gates the Nodes of shoot s on seed: its control plane and machines run there
// (it has worker pools, is placed on the seed and not hibernated) and it is not being deleted.
func gatesNodes(s *corev1beta1.Shoot, seed string) bool {
	return s != nil && s.GetSpec().GetSeedName() == seed && s.GetStatus().GetSeedName() == seed &&
		s.GetMetadata().GetDeletionTimestamp() == nil && len(s.GetSpec().GetProvider().GetWorkers()) > 0 &&
		!s.GetSpec().GetHibernation().GetEnabled() && s.GetStatus().GetTechnicalId() != ""
}

// gateLoop runs a node gate (gateNodes) for every shoot whose Nodes the agent gates (gatesNodes), when it runs the
// control planes in the seed (deploysControlPlane), and stops it when the shoot no longer needs one; it returns once
// every gate has stopped.
func (c *Controller) gateLoop(ctx context.Context) {
	gates := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range gates {
			stop()
		}
		wg.Wait()
	}()
	t := time.NewTicker(nodeGateScan)
	defer t.Stop()
	for {
		want := map[string]string{} // shoot key → namespace in the seed
		for _, key := range c.cfg.Cache.Keys(resources.Shoots) {
			if s := c.current(key); gatesNodes(s, c.cfg.SeedName) {
				want[key] = s.GetStatus().GetTechnicalId()
			}
		}
		for key, stop := range gates {
			if _, ok := want[key]; !ok {
				stop()
				delete(gates, key)
			}
		}
		for key := range gates {
			delete(want, key)
		}
		if len(want) > 0 {
			// Machines join only a control plane the agent runs (a seed with nodes, or one told to deploy it). Asked
			// only before a gate starts: the seed's Nodes are read from its API server, not from an informer.
			if cp, err := c.deploysControlPlane(ctx); err != nil || !cp {
				clear(want)
			}
		}
		for key, ns := range want {
			gctx, stop := context.WithCancel(ctx)
			gates[key] = stop
			wg.Go(func() { c.gateNodes(gctx, key, ns) })
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gateNodes takes the critical-components taint off the Nodes of the shoot whose control plane is in namespace ns
// as their critical components become ready, until ctx ends: it lists the Nodes, releases those whose components are
// ready (looking again every nodeGateRecheck while one is not), then watches them until one is tainted.
func (c *Controller) gateNodes(ctx context.Context, key, ns string) {
	delay := nodeGateRecheck
	for {
		err := c.gateOnce(ctx, key, ns)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Debug("node gate: trying again", "shoot", key, "in", delay, "err", err)
			delay = min(2*delay, nodeGateMaxBackoff)
		} else {
			delay = nodeGateRecheck
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// gateOnce is one round of gateNodes with a client of its own: nil when the Nodes' watch ended without a failure.
func (c *Controller) gateOnce(ctx context.Context, key, ns string) error {
	cfg, err := c.shootREST(ctx, ns)
	if err != nil {
		return err
	}
	cfg.Timeout = 0 // the watch outlives a request's timeout; every other call has nodeGateCallLimit
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	cs, err := newClientset(cfg, hc)
	if err != nil {
		return err
	}
	for {
		lctx, cancel := context.WithTimeout(ctx, nodeGateCallLimit)
		nodes, err := cs.CoreV1().Nodes().List(lctx, kmetav1.ListOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		waiting := 0
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if !slices.ContainsFunc(n.Spec.Taints, isGateTaint) {
				continue
			}
			released, err := c.release(ctx, cs, key, n)
			if err != nil {
				return err
			}
			if !released {
				waiting++
			}
		}
		if waiting > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(nodeGateRecheck):
			}
			continue
		}
		w, err := cs.CoreV1().Nodes().Watch(ctx, kmetav1.ListOptions{ResourceVersion: nodes.ResourceVersion, TimeoutSeconds: new(int64(300))})
		if err != nil {
			return fmt.Errorf("watch nodes: %w", err)
		}
		tainted, err := untilTainted(w)
		if err != nil || !tainted {
			return err
		}
	}
}

// untilTainted reads w until a Node with the critical-components taint is added or changed (true), or the watch ends;
// it stops w.
func untilTainted(w watch.Interface) (bool, error) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return false, apierrors.FromObject(ev.Object)
		case watch.Added, watch.Modified:
			if n, ok := ev.Object.(*corev1.Node); ok && slices.ContainsFunc(n.Spec.Taints, isGateTaint) {
				return true, nil
			}
		}
	}
	return false, nil
}

// release takes the critical-components taint off n once every critical component that runs there is ready
// (criticalNotReady), and reports whether it did; a conflicting write leaves it for the next look.
func (c *Controller) release(ctx context.Context, cs clientset, key string, n *corev1.Node) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeGateCallLimit)
	defer cancel()
	critical := kmetav1.ListOptions{LabelSelector: labelCriticalComponent + "=true"}
	sets, err := cs.AppsV1().DaemonSets("").List(ctx, critical)
	if err != nil {
		return false, fmt.Errorf("list critical DaemonSets: %w", err)
	}
	critical.FieldSelector = "spec.nodeName=" + n.Name
	pods, err := cs.CoreV1().Pods("").List(ctx, critical)
	if err != nil {
		return false, fmt.Errorf("list the critical pods of node %s: %w", n.Name, err)
	}
	if waiting := criticalNotReady(n, sets.Items, pods.Items); len(waiting) > 0 {
		return false, nil
	}
	n = n.DeepCopy()
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isGateTaint)
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, kmetav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("take the taint %s off node %s: %w", TaintCriticalComponentsNotReady, n.Name, err)
	}
	c.log.Info("node's critical components are ready: taint removed", "shoot", key, "node", n.Name,
		"taint", TaintCriticalComponentsNotReady, "after", time.Since(n.CreationTimestamp.Time).Round(100*time.Millisecond))
	return true, nil
}

func isGateTaint(t corev1.Taint) bool { return t.Key == TaintCriticalComponentsNotReady }

// criticalNotReady names the critical DaemonSets (of sets) that should run a pod on node n but have no ready one
// among pods (the critical pods on n): those whose pod template selects n's labels (nodeSelector) and tolerates the
// critical-components taint, as a DaemonSet's controller places its pods.
func criticalNotReady(n *corev1.Node, sets []appsv1.DaemonSet, pods []corev1.Pod) []string {
	gate := corev1.Taint{Key: TaintCriticalComponentsNotReady, Effect: corev1.TaintEffectNoSchedule}
	var waiting []string
	for _, ds := range sets {
		tmpl := ds.Spec.Template.Spec
		if !labels.SelectorFromSet(tmpl.NodeSelector).Matches(labels.Set(n.Labels)) ||
			!slices.ContainsFunc(tmpl.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &gate, false) }) {
			continue
		}
		ready := slices.ContainsFunc(pods, func(p corev1.Pod) bool {
			owner := kmetav1.GetControllerOf(&p)
			return owner != nil && owner.UID == ds.UID && p.Spec.NodeName == n.Name && podReady(&p)
		})
		if !ready {
			waiting = append(waiting, ds.Namespace+"/"+ds.Name)
		}
	}
	return waiting
}
