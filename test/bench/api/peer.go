package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trellis-dev/trellis/test/bench/procstat"
)

// peerBinaries returns the paths of etcd and kube-apiserver in dir, or an error naming what is missing.
func peerBinaries(dir string) (etcd, apiserver string, err error) {
	paths := []string{filepath.Join(dir, "etcd"), filepath.Join(dir, "kube-apiserver")}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", "", fmt.Errorf("-peer: no executable %s: run `make testbin`", p)
		}
	}
	return paths[0], paths[1], nil
}

// shootCRD is the peer's Shoot kind: core.gardener.cloud/v1beta1 Shoot with a status subresource and a permissive
// schema (spec and status keep unknown fields). Gardener serves Shoots from its own aggregated API server, not from a
// CRD; this CRD gives kube-apiserver the same objects with the least validation it can do, so the peer's numbers are
// an upper bound of what a Shoot CRD costs there.
func shootCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "shoots.core.gardener.cloud"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "core.gardener.cloud",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "shoots", Singular: "shoot", Kind: "Shoot", ListKind: "ShootList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta1", Served: true, Storage: true,
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: shootColumns(),
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": open, "status": open},
				}},
			}},
		},
	}
}

// shootColumns are the hub's Shoot table columns (proto/trellis/core/v1beta1) as a CRD can state them: JSONPaths
// without filters, so HIBERNATION and LAST OPERATION read one field each and the wide condition columns are left
// out (the hub's table has 8 columns and 6 wide ones; this one 8 and 3).
func shootColumns() []apiextensionsv1.CustomResourceColumnDefinition {
	col := func(name, path string, priority int32) apiextensionsv1.CustomResourceColumnDefinition {
		return apiextensionsv1.CustomResourceColumnDefinition{Name: name, Type: "string", JSONPath: path, Priority: priority}
	}
	return []apiextensionsv1.CustomResourceColumnDefinition{
		col("CloudProfile", ".spec.cloudProfile.name", 0),
		col("Provider", ".spec.provider.type", 0),
		col("Region", ".spec.region", 0),
		col("K8S Version", ".spec.kubernetes.version", 0),
		col("Hibernation", ".spec.hibernation.enabled", 0),
		col("Last Operation", ".status.lastOperation.state", 0),
		col("Status", ".metadata.labels.shoot\\.gardener\\.cloud/status", 0),
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		col("Seed", ".spec.seedName", 1),
		col("Purpose", ".spec.purpose", 1),
		col("Gardener Version", ".status.gardener.version", 1),
	}
}

// startPeer starts etcd and kube-apiserver from testbin with their files in dir, installs the Shoot CRD and returns
// the peer as a target. etcd syncs its writes to disk as the hub's embedded etcd does (envtest turns that off).
func startPeer(dir, testbin string) (*target, error) {
	etcdBin, apiBin, err := peerBinaries(testbin)
	if err != nil {
		return nil, err
	}
	logs, err := os.OpenFile(filepath.Join(dir, "peer.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	etcd := &envtest.Etcd{Path: etcdBin, DataDir: filepath.Join(dir, "peer-etcd"), Out: logs, Err: logs}
	etcd.Configure().Set("unsafe-no-fsync", "false")
	falseValue := false
	env := &envtest.Environment{
		UseExistingCluster:       &falseValue,
		ControlPlane:             envtest.ControlPlane{Etcd: etcd},
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
		CRDs:                     []*apiextensionsv1.CustomResourceDefinition{shootCRD()},
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path, api.Out, api.Err = apiBin, logs, logs
	api.CertDir = filepath.Join(dir, "peer-pki")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		_ = logs.Close()
		return nil, err
	}
	begin := time.Now()
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = logs.Close()
		return nil, fmt.Errorf("start the peer (etcd %s, kube-apiserver %s; log %s): %w", etcdBin, apiBin, logs.Name(), err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAData) {
		_ = env.Stop()
		_ = logs.Close()
		return nil, errors.New("the peer's CA: no certificate")
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		_ = env.Stop()
		_ = logs.Close()
		return nil, fmt.Errorf("the peer's admin certificate: %w", err)
	}
	pids := childPIDs("etcd", "kube-apiserver")
	if len(pids) != 2 {
		fmt.Fprintf(os.Stderr, "peer: found %d of its 2 processes (etcd, kube-apiserver) for CPU and memory figures\n", len(pids))
	}
	fmt.Printf("peer kube-apiserver %s (etcd and kube-apiserver pids %v) ready after %s, Shoot CRD served\n",
		cfg.Host, pids, time.Since(begin).Round(time.Millisecond))
	return &target{
		name: "kube-apiserver",
		url:  strings.TrimSuffix(cfg.Host, "/"),
		tls:  &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		pids: pids,
		stop: func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop the peer:", err)
			}
			_ = logs.Close()
		},
		prerequisites: peerPrerequisites,
	}, nil
}

// childPIDs returns the pids of this process's children whose command is one of names.
func childPIDs(names ...string) []int {
	var pids []int
	for _, p := range procstat.Processes() {
		if p.PPID == os.Getpid() && slices.Contains(names, p.Comm) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// peerPrerequisites are what the peer needs before Shoots: their namespace. It has no Projects, CloudProfiles or
// credentials, and no admission that would look for them.
func peerPrerequisites() []prerequisite {
	var out []prerequisite
	for _, p := range prerequisites() {
		if p.path == "/api/v1/namespaces" {
			out = append(out, p)
		}
	}
	return out
}
