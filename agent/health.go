package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
)

// apiserverHealth checks the seed as gardenlet's lease controller does: GET /healthz on its kube-apiserver must
// answer 200.
func apiserverHealth(client kubernetes.Interface) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rc := client.Discovery().RESTClient()
		if rc == nil {
			return errors.New("the seed client has no REST client for /healthz")
		}
		var code int
		res := rc.Get().AbsPath("/healthz").Do(ctx).StatusCode(&code)
		if err := res.Error(); err != nil {
			return fmt.Errorf("seed kube-apiserver /healthz: %w", err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("seed kube-apiserver /healthz answered %d", code)
		}
		return nil
	}
}
