package local

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// OSCResultSecretPrefix starts the name of the Secret with a provision config's user data: osc-result-<osc name>.
const OSCResultSecretPrefix = "osc-result-"

// operatingSystemConfig renders a provision config's units and files as cloud-init user data into the Secret
// osc-result-<name> (key cloud_config, owned by the config) and points status.cloudConfig at it. A reconcile config
// needs no translation: gardener-node-agent applies it as it is, and provider-local adds no units or files.
type operatingSystemConfig struct{ seed }

func (a *operatingSystemConfig) Reconcile(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig, _ *extsdk.Cluster) error {
	if osc.Spec.Purpose != extensionsv1alpha1.OperatingSystemConfigPurposeProvision {
		osc.Status.ExtensionUnits, osc.Status.ExtensionFiles = nil, nil
		return nil
	}
	userData, err := a.render(ctx, osc)
	if err != nil {
		return err
	}
	name := OSCResultSecretPrefix + osc.Name
	gvk := extensionsv1alpha1.SchemeGroupVersion.WithKind("OperatingSystemConfig")
	s := corev1ac.Secret(name, osc.Namespace).
		WithLabels(ownerLabels("operatingsystemconfig", osc.Name)).
		WithLabels(map[string]string{"gardener.cloud/purpose": "cloud-config"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(gvk.GroupVersion().String()).WithKind(gvk.Kind).
			WithName(osc.Name).WithUID(osc.UID).WithController(true)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{extensionsv1alpha1.OperatingSystemConfigSecretDataKey: userData})
	if err := a.apply(ctx, s); err != nil {
		return fmt.Errorf("deploy the user data secret: %w", err)
	}
	log.V(1).Info("Rendered user data", "secret", name, "bytes", len(userData))
	osc.Status.CloudConfig = &extensionsv1alpha1.CloudConfig{SecretRef: corev1.SecretReference{Name: name, Namespace: osc.Namespace}}
	return nil
}

func (a *operatingSystemConfig) Delete(ctx context.Context, _ logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig, _ *extsdk.Cluster) error {
	return a.remove(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: OSCResultSecretPrefix + osc.Name, Namespace: osc.Namespace}})
}

// Migrate deletes the user data secret; the destination seed renders it again.
func (a *operatingSystemConfig) Migrate(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig, cluster *extsdk.Cluster) error {
	return a.Delete(ctx, log, osc, cluster)
}

// cloudConfig is the part of cloud-init's #cloud-config that the user data uses.
type cloudConfig struct {
	WriteFiles []cloudFile `json:"write_files,omitempty"`
	RunCmd     []string    `json:"runcmd,omitempty"`
}

type cloudFile struct {
	Path        string `json:"path"`
	Permissions string `json:"permissions,omitempty"`
	Encoding    string `json:"encoding,omitempty"`
	Content     string `json:"content"`
}

// render returns the user data: every file (contents base64-encoded, except those to be transmitted unencoded, such
// as the <<BOOTSTRAP_TOKEN>> placeholder that machine-controller-manager replaces per machine), every unit and its
// drop-ins under /etc/systemd/system, then commands that reload systemd, enable the enabled units and run each unit's
// command. Files whose content is an image reference are gardener-node-agent's to fetch and are left out.
func (a *operatingSystemConfig) render(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig) ([]byte, error) {
	cc := cloudConfig{}
	for _, f := range osc.Spec.Files {
		perm := extensionsv1alpha1.OperatingSystemConfigDefaultFilePermission
		if f.Permissions != nil {
			perm = *f.Permissions
		}
		file := cloudFile{Path: f.Path, Permissions: "0" + strconv.FormatInt(int64(perm), 8)}
		var content []byte
		switch c := f.Content; {
		case c.Inline != nil && c.Inline.Encoding == extensionsv1alpha1.FileEncodingB64:
			b, err := base64.StdEncoding.DecodeString(c.Inline.Data)
			if err != nil {
				return nil, fmt.Errorf("file %s: inline data is not base64: %w", f.Path, err)
			}
			content = b
		case c.Inline != nil:
			content = []byte(c.Inline.Data)
		case c.SecretRef != nil:
			s := &corev1.Secret{}
			if err := a.r.Get(ctx, client.ObjectKey{Namespace: osc.Namespace, Name: c.SecretRef.Name}, s); err != nil {
				return nil, fmt.Errorf("file %s: read secret %s: %w", f.Path, c.SecretRef.Name, err)
			}
			b, ok := s.Data[c.SecretRef.DataKey]
			if !ok {
				return nil, fmt.Errorf("file %s: secret %s has no key %s", f.Path, c.SecretRef.Name, c.SecretRef.DataKey)
			}
			content = b
		default:
			continue
		}
		if f.Content.TransmitUnencoded != nil && *f.Content.TransmitUnencoded {
			file.Content = string(content)
		} else {
			file.Encoding, file.Content = "b64", base64.StdEncoding.EncodeToString(content)
		}
		cc.WriteFiles = append(cc.WriteFiles, file)
	}

	cc.RunCmd = []string{"systemctl daemon-reload"}
	for _, u := range osc.Spec.Units {
		dir := "/etc/systemd/system"
		if u.Content != nil {
			cc.WriteFiles = append(cc.WriteFiles, cloudFile{Path: path.Join(dir, u.Name), Permissions: "0644", Encoding: "b64",
				Content: base64.StdEncoding.EncodeToString([]byte(*u.Content))})
		}
		for _, d := range u.DropIns {
			cc.WriteFiles = append(cc.WriteFiles, cloudFile{Path: path.Join(dir, u.Name+".d", d.Name), Permissions: "0644",
				Encoding: "b64", Content: base64.StdEncoding.EncodeToString([]byte(d.Content))})
		}
		if u.Enable != nil && *u.Enable {
			cc.RunCmd = append(cc.RunCmd, "systemctl enable '"+u.Name+"'")
		}
		if u.Command != nil {
			cc.RunCmd = append(cc.RunCmd, "systemctl "+string(*u.Command)+" '"+u.Name+"'")
		}
	}
	out, err := yaml.Marshal(cc)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), out...), nil
}
