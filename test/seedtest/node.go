package seedtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/timescale"
)

// WithNode runs a real node in the seed (test/localnode): containerd, kubelet, kube-proxy, kube-scheduler, CoreDNS
// and a default StorageClass, so that pods run. The start takes a few seconds more and needs root and `make testbin`.
// The seed's service network, and the node's pod network, are those of the node's slot; the kube-apiserver admits
// service accounts (pods get tokens) and the controller manager runs what pods, Services, StatefulSets and volumes
// need (nodeControllers). log receives the node's progress; nil discards it.
func WithNode(log *slog.Logger) Option {
	return func(o *options) {
		o.node = true
		o.nodeLog = log
	}
}

// WithNodeSlot makes WithNode's node take slot i if it is free (localnode.Reserve), so that a seed restarted on the
// same data keeps its networks.
func WithNodeSlot(i int) Option {
	return func(o *options) { o.nodeSlot = i }
}

// WithNodeImages imports further image archives into the node of WithNode (e.g. `make images`' provider-local).
func WithNodeImages(archives ...string) Option {
	return func(o *options) { o.nodeImages = append(o.nodeImages, archives...) }
}

// nodeControllers are the controllers a seed with a node runs besides controllers: service accounts and the root CA
// ConfigMap (pods' API credentials), endpoints and EndpointSlices (Services), the workload controllers, volume binding
// and protection (the StorageClass), the pod garbage collector (pods of a node that is gone), and the node lifecycle
// controller, which lifts the not-ready taint kubelet registers its node with.
var nodeControllers = []string{"serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"endpoints-controller", "endpointslice-controller", "endpointslice-mirroring-controller", "statefulset-controller",
	"daemonset-controller", "job-controller", "persistentvolume-binder-controller",
	"persistentvolume-protection-controller", "persistentvolumeclaim-protection-controller",
	"pod-garbage-collector-controller", "ttl-after-finished-controller", "disruption-controller",
	"node-lifecycle-controller"}

// configureForNode reserves the node's slot and sets the kube-apiserver up for it: the slot's service network, the
// host's end of the node's link as advertise address (pods reach the apiserver there, through the node's forwarder),
// the ServiceAccount admission plugin, and a serving certificate valid for every address the apiserver is reached at
// (loopback, the link, Service default/kubernetes), which envtest's own (localhost only) is not.
func configureForNode(api *envtest.APIServer, certDir string, o options) (*localnode.Slot, error) {
	slot, err := localnode.Reserve(o.nodeSlot)
	if err != nil {
		return nil, err
	}
	args := api.Configure()
	args.Set("service-cluster-ip-range", slot.ServiceCIDR.String())
	args.Set("advertise-address", slot.HostIP.String())
	args.Set("kubelet-preferred-address-types", "InternalIP,Hostname")
	args.Disable("disable-admission-plugins")
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IP(slot.HostIP.AsSlice()), net.IP(slot.APIServiceIP.AsSlice())}
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
	chain, key, err := certutil.GenerateSelfSignedCertKey("kube-apiserver", ips, dns)
	if err != nil {
		slot.Release()
		return nil, err
	}
	// The chain is the serving certificate followed by the CA that signed it.
	leaf, rest := pem.Decode(chain)
	if leaf == nil || len(rest) == 0 {
		slot.Release()
		return nil, errors.New("self-signed serving certificate: no CA in the chain")
	}
	api.SecureServing.CA = rest
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		slot.Release()
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		slot.Release()
		return nil, err
	}
	// envtest generates its own certificates only when apiserver.crt is missing; it reads these names.
	for name, data := range map[string][]byte{
		"apiserver.crt": chain, "apiserver.key": key, "ca.crt": rest,
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			slot.Release()
			return nil, err
		}
	}
	return slot, nil
}

// startNode starts the node of a seed whose control plane runs.
func (s *Seed) startNode(ctx context.Context, slot *localnode.Slot, testbin string, o options) error {
	ctx, cancel := context.WithTimeout(ctx, 4*timescale.Scale(StartTimeout))
	defer cancel()
	n, err := localnode.Start(ctx, localnode.Config{Slot: slot, Dir: filepath.Join(s.Dir, "node"), Testbin: testbin,
		Kubeconfig: s.Kubeconfig, Images: o.nodeImages, Log: o.nodeLog})
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	s.Node = n
	return nil
}
