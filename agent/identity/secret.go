package identity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// KubeconfigKey is the data key of the kubeconfig in the credentials Secret.
const KubeconfigKey = "kubeconfig"

// SecretStore keeps the credentials as a kubeconfig in a Secret of the seed cluster.
type SecretStore struct {
	// Client reaches the seed cluster's Secrets (a core client, or a clientset's CoreV1()).
	Client corev1client.SecretsGetter
	// Namespace and Name name the Secret (Gardener: garden/gardenlet-kubeconfig).
	Namespace, Name string
}

// Load returns the stored credentials; nil and no error when the Secret or its kubeconfig key does not exist.
func (s *SecretStore) Load(ctx context.Context) (*Credentials, error) {
	sec, err := s.Client.Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	data, ok := sec.Data[KubeconfigKey]
	if !ok || len(data) == 0 {
		return nil, nil
	}
	c, err := ParseKubeconfig(data)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return c, nil
}

// Save writes the credentials into the Secret, creating it or replacing its kubeconfig key.
func (s *SecretStore) Save(ctx context.Context, c *Credentials) error {
	kubeconfig, err := c.Kubeconfig()
	if err != nil {
		return err
	}
	secrets := s.Client.Secrets(s.Namespace)
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{KubeconfigKey: kubeconfig},
	}
	_, err = secrets.Create(ctx, sec, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := secrets.Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Data == nil {
			cur.Data = map[string][]byte{}
		}
		cur.Data[KubeconfigKey] = kubeconfig
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
