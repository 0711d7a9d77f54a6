package shoot

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// taskMachineBootstrap lets the shoot's machines join it (shoots with workers whose control plane the agent runs).
const taskMachineBootstrap = "Deploying the bootstrap token of the shoot's machines"

// Kubernetes' TLS bootstrap of kubelets: the group of bootstrap tokens, and the bindings that let it request node
// client certificates that the kube-controller-manager approves and signs (and nodes renew theirs).
const (
	groupBootstrappers        = "system:bootstrappers"
	groupNodes                = "system:nodes"
	bootstrapTokenDescription = "Trellis: the shoot's machines join with it (kubelet TLS bootstrap)"
	clusterRoleNodeSelfDelete = "gardener.cloud:system:node-self-delete"
)

// deployMachineBootstrap lets kubelets join the shoot with Kubernetes' TLS bootstrap: the ClusterRoleBindings of
// system:bootstrappers (create CSRs, have node client CSRs approved) and system:nodes (renew their own, and delete
// their own Node when their machine goes), a bootstrap
// token in the shoot's kube-system, and the token in the seed Secret extensionsv1alpha1.MachineBootstrapTokenSecret,
// from which the Worker extension fills in its machines' user data. The token is made once and kept (it lives as
// long as the shoot); the shoot's kube-controller-manager approves and signs the kubelets' CSRs with the client CA.
func (op *operation) deployMachineBootstrap(ctx context.Context) error {
	rbac, core, closeIdle, err := op.shootClients(ctx)
	if err != nil {
		return err
	}
	defer closeIdle()
	bindings := map[string]rbacv1.Subject{
		"system:node-bootstrapper": {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: groupBootstrappers},
		"system:certificates.k8s.io:certificatesigningrequests:nodeclient":     {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: groupBootstrappers},
		"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient": {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: groupNodes},
	}
	// A machine's provider deletes its Node with the kubelet's own credentials, as a cloud's machine controller does;
	// NodeRestriction (on with workers) limits a node to its own.
	selfDelete := &rbacv1.ClusterRole{ObjectMeta: kmetav1.ObjectMeta{Name: clusterRoleNodeSelfDelete},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"delete"}}}}
	if _, err := rbac.ClusterRoles().Create(ctx, selfDelete, kmetav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("shoot: create cluster role %s: %w", selfDelete.Name, err)
	}
	bindings[clusterRoleNodeSelfDelete] = rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: groupNodes}
	for role, subject := range bindings {
		name := role
		if !strings.HasPrefix(name, "gardener.cloud:") {
			name = "gardener.cloud:" + role
		}
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: kmetav1.ObjectMeta{Name: name}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, b, kmetav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("shoot: create cluster role binding %s: %w", b.Name, err)
		}
	}

	token, err := op.machineBootstrapToken(ctx)
	if err != nil {
		return err
	}
	id, secret, _ := strings.Cut(token, ".")
	shootSecret := &corev1.Secret{
		ObjectMeta: kmetav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: kmetav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true",
			"description": bootstrapTokenDescription},
	}
	if _, err := core.Secrets(kmetav1.NamespaceSystem).Create(ctx, shootSecret, kmetav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("shoot: create bootstrap token secret: %w", err)
	}
	return op.deploySecret(ctx, extensionsv1alpha1.MachineBootstrapTokenSecret,
		map[string][]byte{extensionsv1alpha1.MachineBootstrapTokenKey: []byte(token)}, nil)
}

// machineBootstrapToken returns the token of the seed Secret, or a new one when there is none.
func (op *operation) machineBootstrapToken(ctx context.Context) (string, error) {
	s := &corev1.Secret{}
	err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: extensionsv1alpha1.MachineBootstrapTokenSecret}, s)
	switch {
	case err == nil:
		t := string(s.Data[extensionsv1alpha1.MachineBootstrapTokenKey])
		if id, secret, ok := strings.Cut(t, "."); ok && len(id) == 6 && len(secret) == 16 {
			return t, nil
		}
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("read secret %s/%s: %w", op.ns, extensionsv1alpha1.MachineBootstrapTokenSecret, err)
	}
	return randomToken(6) + "." + randomToken(16), nil
}

// randomToken is n characters of [a-z0-9], a bootstrap token's alphabet.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		_, _ = rand.Read(buf) // never fails (crypto/rand)
		for _, c := range buf {
			if c < 252 && len(out) < n { // 252 = 7*36: no bias
				out = append(out, alphabet[c%36])
			}
		}
	}
	return string(out)
}

// bootstrapKubeconfig is the kubelet's bootstrap kubeconfig of the provision user data: the shoot's kube-apiserver
// at its Service's ClusterIP in the seed (machines of the local landscape reach the seed's cluster IPs; the serving
// certificate names it), the cluster CA bundle, and the token placeholder the Worker extension fills in.
func (op *operation) bootstrapKubeconfig(ctx context.Context) (string, error) {
	ip, err := op.apiServerAddress(ctx)
	if err != nil {
		return "", err
	}
	bundle := &corev1.Secret{}
	if err := op.c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: op.ns, Name: credentials.NameCABundle}, bundle); err != nil {
		return "", fmt.Errorf("read the cluster CA bundle: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["shoot"] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(ip, strconv.Itoa(portKubeAPIServer)),
		CertificateAuthorityData: bundle.Data[credentials.DataKeyCertificateBundle]}
	cfg.AuthInfos["kubelet-bootstrap"] = &clientcmdapi.AuthInfo{Token: extensionsv1alpha1.BootstrapTokenPlaceholder}
	cfg.Contexts["kubelet-bootstrap"] = &clientcmdapi.Context{Cluster: "shoot", AuthInfo: "kubelet-bootstrap"}
	cfg.CurrentContext = "kubelet-bootstrap"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
