// Command localseed runs the local landscape's seed: a real kube-apiserver with its etcd and a kube-controller-manager
// (namespace deletion, garbage collection of owned objects), from the binaries `make testbin` builds, until it is
// signalled. With --node it also runs the seed's node (test/localnode: containerd, kubelet, kube-proxy,
// kube-scheduler, CoreDNS, a default StorageClass), so that pods run, and writes the node's networks to
// <dir>/node.json. It writes the admin kubeconfig to <dir>/kubeconfig and creates the namespace garden, where the
// agent keeps its credentials (a gardenlet's chart creates it in a real seed). It is a development tool for `make
// up`, not a production seed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/seedtest"
)

// NodeInfo is what <dir>/node.json holds: the node's name and the seed's networks (Seed spec.networks).
type NodeInfo struct {
	Name     string `json:"name"`
	Slot     int    `json:"slot"`
	Nodes    string `json:"nodes"`
	Pods     string `json:"pods"`
	Services string `json:"services"`
}

func main() {
	dir := flag.String("dir", ".trellis/local/seed", "directory for the seed's data, logs and kubeconfig")
	node := flag.Bool("node", false, "run a node in the seed (needs root and `make testbin`)")
	images := flag.String("node-images", "", "comma-separated image archives the node imports besides its own")
	audit := flag.Bool("audit-log", false, "write the kube-apiserver's audit log of every request to <dir>/"+seedtest.AuditLogName)
	flag.Parse()
	if err := run(*dir, *node, *images, *audit); err != nil {
		fmt.Fprintln(os.Stderr, "localseed:", err)
		os.Exit(1)
	}
}

func run(dir string, node bool, images string, audit bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The seed keeps its etcd data across restarts; its certificates and process links are made anew each start.
	for _, sub := range []string{"pki", "bin"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	infoFile := filepath.Join(dir, "node.json")
	var opts []seedtest.Option
	if node {
		opts = append(opts, seedtest.WithNode(slog.New(slog.NewTextHandler(os.Stdout, nil))))
		// The node takes its last slot again when it is free: the seed's Services keep their ClusterIPs.
		var last NodeInfo
		if b, err := os.ReadFile(infoFile); err == nil && json.Unmarshal(b, &last) == nil {
			opts = append(opts, seedtest.WithNodeSlot(last.Slot))
		}
		for _, img := range strings.Split(images, ",") {
			if img = strings.TrimSpace(img); img != "" {
				opts = append(opts, seedtest.WithNodeImages(img))
			}
		}
	}
	if audit {
		opts = append(opts, seedtest.WithAuditLog())
	}
	if err := os.Remove(infoFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s, err := seedtest.StartInDirContext(ctx, dir, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace garden: %w", err)
	}
	what := "seed"
	if s.Node != nil {
		slot := s.Node.Slot()
		b, err := json.MarshalIndent(NodeInfo{Name: s.Node.Name, Slot: slot.Index, Nodes: slot.NodeCIDR.String(),
			Pods: slot.PodCIDR.String(), Services: slot.ServiceCIDR.String()}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(infoFile, append(b, '\n'), 0o600); err != nil {
			return err
		}
		what = "seed with node " + s.Node.Name + " (slot " + strconv.Itoa(slot.Index) + ")"
	}
	fmt.Printf("%s %s ready in %s; kubeconfig %s\n", what, s.Config.Host, s.StartDuration.Round(1e6), s.KubeconfigPath)
	<-ctx.Done()
	return nil
}
