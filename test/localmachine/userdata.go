package localmachine

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// BootstrapKubeconfigPath is where the user data puts the kubelet's bootstrap kubeconfig (Gardener's path).
const BootstrapKubeconfigPath = extensionsv1alpha1.KubeletBootstrapKubeconfigPath

// cloudConfig is the part of cloud-init's #cloud-config a machine reads.
type cloudConfig struct {
	WriteFiles []struct {
		Path     string `json:"path"`
		Encoding string `json:"encoding"`
		Content  string `json:"content"`
	} `json:"write_files"`
}

// bootstrapKubeconfig returns the kubelet's bootstrap kubeconfig from cloud-config user data.
func bootstrapKubeconfig(userData []byte) ([]byte, error) {
	s := string(userData)
	if !strings.HasPrefix(s, "#cloud-config\n") {
		return nil, errors.New("userData: not cloud-config (no #cloud-config line)")
	}
	cc := cloudConfig{}
	if err := yaml.Unmarshal(userData, &cc); err != nil {
		return nil, fmt.Errorf("userData: %w", err)
	}
	for i, f := range cc.WriteFiles {
		if f.Path != BootstrapKubeconfigPath {
			continue
		}
		switch f.Encoding {
		case "":
			return []byte(f.Content), nil
		case "b64", "base64":
			b, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return nil, fmt.Errorf("userData: write_files[%d].content: %w", i, err)
			}
			return b, nil
		default:
			return nil, fmt.Errorf("userData: write_files[%d].encoding %q: want b64 or none", i, f.Encoding)
		}
	}
	return nil, fmt.Errorf("userData: no file %s (the kubelet's bootstrap kubeconfig)", BootstrapKubeconfigPath)
}
