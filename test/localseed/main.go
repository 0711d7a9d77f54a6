// Command localseed runs the local landscape's seed: a real kube-apiserver with its etcd and a kube-controller-manager
// (namespace deletion, garbage collection of owned objects), from the binaries `make testbin` builds, until it is
// signalled. It writes the admin kubeconfig to <dir>/kubeconfig and creates the namespace garden, where the agent
// keeps its credentials (a gardenlet's chart creates it in a real seed). It is a development tool for `make up`, not
// a production seed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/test/seedtest"
)

func main() {
	dir := flag.String("dir", ".trellis/local/seed", "directory for the seed's data, logs and kubeconfig")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "localseed:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The seed keeps its etcd data across restarts; its certificates and process links are made anew each start.
	for _, sub := range []string{"pki", "bin"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	s, err := seedtest.StartInDir(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace garden: %w", err)
	}
	fmt.Printf("seed %s ready in %s; kubeconfig %s\n", s.Config.Host, s.StartDuration.Round(1e6), s.KubeconfigPath)
	<-ctx.Done()
	return nil
}
