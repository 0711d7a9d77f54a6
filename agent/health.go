package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
)

// apiserverHealth checks the seed as gardenlet's lease controller does: GET /healthz on its kube-apiserver must
// answer 200. The request goes through the core client's REST client (its path replaced).
func apiserverHealth(client SeedClient) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		rc := client.CoreV1().RESTClient()
		if r, ok := rc.(*rest.RESTClient); rc == nil || (ok && r == nil) { // a fake clientset's core client has none
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
