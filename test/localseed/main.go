// Command localseed runs the local landscape's seed: a real kube-apiserver with its etcd and a kube-controller-manager
// (namespace deletion, garbage collection of owned objects), from the binaries `make testbin` builds, until it is
// signalled. With --node it also runs the seed's node (test/localnode: containerd, kubelet, kube-proxy,
// kube-scheduler, CoreDNS, a default StorageClass), so that pods run, and writes the node's networks to
// <dir>/node.json. With --node and --machine-provider-port it also serves the local machine provider
// (test/localmachine) on the node's HostIP, where provider-local's pod reaches it, and writes its URL and token to
// <dir>/machine-provider.json: the machines of the seed's shoots become real Nodes, and import the image archives of
// --machine-images besides their own. It writes the admin kubeconfig to <dir>/kubeconfig and creates the namespace
// garden, where the agent keeps its credentials (a gardenlet's chart creates it in a real seed). It is a development
// tool for `make up`, not a production seed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/localmachine"
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
	machinePort := flag.Int("machine-provider-port", 0, "with --node, serve the local machine provider on the node's HostIP at this port (0: none)")
	machineImages := flag.String("machine-images", "", "comma-separated image archives every machine of the machine provider imports besides its own")
	audit := flag.Bool("audit-log", false, "write the kube-apiserver's audit log of every request to <dir>/"+seedtest.AuditLogName)
	flag.Parse()
	if err := run(*dir, *node, archives(*images), archives(*machineImages), *machinePort, *audit); err != nil {
		fmt.Fprintln(os.Stderr, "localseed:", err)
		os.Exit(1)
	}
}

// MachineProviderInfo is what <dir>/machine-provider.json holds: where provider-local reaches the machine provider.
type MachineProviderInfo struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// archives splits a comma-separated list of image archives.
func archives(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func run(dir string, node bool, images, machineImages []string, machinePort int, audit bool) error {
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
		for _, img := range images {
			opts = append(opts, seedtest.WithNodeImages(img))
		}
	}
	if audit {
		opts = append(opts, seedtest.WithAuditLog())
	}
	machineFile := filepath.Join(dir, "machine-provider.json")
	for _, f := range []string{infoFile, machineFile} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
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
		if machinePort > 0 {
			stopMachines, err := serveMachines(s, dir, machineFile, machinePort, machineImages)
			if err != nil {
				return err
			}
			defer stopMachines()
		}
	}
	fmt.Printf("%s %s ready in %s; kubeconfig %s\n", what, s.Config.Host, s.StartDuration.Round(1e6), s.KubeconfigPath)
	<-ctx.Done()
	return nil
}

// serveMachines serves the local machine provider for the seed's node on its HostIP and writes machineFile; the
// returned function stops the server and every machine.
func serveMachines(s *seedtest.Seed, dir, machineFile string, port int, images []string) (func(), error) {
	testbin, err := seedtest.TestbinDir()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	slot := s.Node.Slot()
	srv, err := localmachine.New(localmachine.Config{Parent: slot, Testbin: testbin, Dir: filepath.Join(dir, "machines"), Token: token,
		Images: images, Log: slog.New(slog.NewTextHandler(os.Stdout, nil))})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(slot.HostIP.String(), strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("machine provider: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // ends with Shutdown in the returned function
		defer close(done)
		_ = hs.Serve(ln)
	}()
	stop := func() {
		_ = hs.Shutdown(context.Background())
		<-done
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "localseed: machine provider:", err)
		}
	}
	info, err := json.MarshalIndent(MachineProviderInfo{URL: "http://" + ln.Addr().String(), Token: token}, "", "  ")
	if err == nil {
		err = os.WriteFile(machineFile, append(info, '\n'), 0o600)
	}
	if err != nil {
		stop()
		return nil, err
	}
	fmt.Printf("machine provider serving at http://%s\n", ln.Addr())
	return stop, nil
}
