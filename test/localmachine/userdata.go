package localmachine

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// BootstrapKubeconfigPath is where the user data puts the kubelet's bootstrap kubeconfig (Gardener's path).
const BootstrapKubeconfigPath = extensionsv1alpha1.KubeletBootstrapKubeconfigPath

// KubeletConfigPath is where the user data puts the kubelet's configuration (Gardener's path): the machine takes
// clusterDNS and clusterDomain from it, so that its pods ask the shoot's CoreDNS, and the taints its Node registers
// with.
const KubeletConfigPath = extensionsv1alpha1.KubeletConfigPath

// cloudConfig is the part of cloud-init's #cloud-config a machine reads.
type cloudConfig struct {
	WriteFiles []struct {
		Path     string `json:"path"`
		Encoding string `json:"encoding"`
		Content  string `json:"content"`
	} `json:"write_files"`
}

// kubeletSettings is the part of a KubeletConfiguration a machine reads.
type kubeletSettings struct {
	ClusterDNS         []string       `json:"clusterDNS"`
	ClusterDomain      string         `json:"clusterDomain"`
	RegisterWithTaints []corev1.Taint `json:"registerWithTaints"`
}

// parseUserData reads cloud-config user data: the files it writes, by path (decoded).
func parseUserData(userData []byte) (map[string][]byte, error) {
	if !strings.HasPrefix(string(userData), "#cloud-config\n") {
		return nil, errors.New("userData: not cloud-config (no #cloud-config line)")
	}
	cc := cloudConfig{}
	if err := yaml.Unmarshal(userData, &cc); err != nil {
		return nil, fmt.Errorf("userData: %w", err)
	}
	files := map[string][]byte{}
	for i, f := range cc.WriteFiles {
		switch f.Encoding {
		case "":
			files[f.Path] = []byte(f.Content)
		case "b64", "base64":
			b, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return nil, fmt.Errorf("userData: write_files[%d].content: %w", i, err)
			}
			files[f.Path] = b
		default:
			return nil, fmt.Errorf("userData: write_files[%d].encoding %q: want b64 or none", i, f.Encoding)
		}
	}
	return files, nil
}

// bootstrapKubeconfig returns the kubelet's bootstrap kubeconfig from cloud-config user data.
func bootstrapKubeconfig(userData []byte) ([]byte, error) {
	files, err := parseUserData(userData)
	if err != nil {
		return nil, err
	}
	kc, ok := files[BootstrapKubeconfigPath]
	if !ok {
		return nil, fmt.Errorf("userData: no file %s (the kubelet's bootstrap kubeconfig)", BootstrapKubeconfigPath)
	}
	return kc, nil
}

// kubeletConfig reads the kubelet configuration in cloud-config user data: its first clusterDNS address, its
// clusterDomain and the taints the Node registers with; empty when the user data has no kubelet configuration or it
// names none of them.
func kubeletConfig(userData []byte) (dns, domain string, taints []corev1.Taint, err error) {
	files, err := parseUserData(userData)
	if err != nil {
		return "", "", nil, err
	}
	cfg, ok := files[KubeletConfigPath]
	if !ok {
		return "", "", nil, nil
	}
	k := kubeletSettings{}
	if err := yaml.Unmarshal(cfg, &k); err != nil {
		return "", "", nil, fmt.Errorf("userData: %s: %w", KubeletConfigPath, err)
	}
	if len(k.ClusterDNS) > 0 {
		if net.ParseIP(k.ClusterDNS[0]) == nil {
			return "", "", nil, fmt.Errorf("userData: %s: clusterDNS %q is no IP address", KubeletConfigPath, k.ClusterDNS[0])
		}
		dns = k.ClusterDNS[0]
	}
	for i, t := range k.RegisterWithTaints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			return "", "", nil, fmt.Errorf("userData: %s: registerWithTaints[%d].key %q: %s", KubeletConfigPath, i, t.Key, msg)
		}
		if t.Value != "" {
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				return "", "", nil, fmt.Errorf("userData: %s: registerWithTaints[%d].value %q: %s", KubeletConfigPath, i, t.Value, msg)
			}
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return "", "", nil, fmt.Errorf("userData: %s: registerWithTaints[%d].effect %q: want NoSchedule, PreferNoSchedule or NoExecute",
				KubeletConfigPath, i, t.Effect)
		}
	}
	return dns, k.ClusterDomain, k.RegisterWithTaints, nil
}
