package landscape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/proto/kjson"

	"github.com/trellis-dev/trellis/test/binproc"
)

// hubClient speaks the hub's REST API as the admin.
type hubClient struct {
	url   string // https://host:port
	token string
	http  *http.Client
}

func newHubClient(url, caFile, token string) (*hubClient, error) {
	pool, err := binproc.LoadCA(caFile)
	if err != nil {
		return nil, err
	}
	return &hubClient{url: url, token: token, http: binproc.HTTPClient(pool, 30*time.Second)}, nil
}

// do sends a request with a JSON body (nil for none; a merge patch for PATCH) and returns the status code and body.
func (c *hubClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return binproc.Do(ctx, c.http, method, c.url+path, c.token, body)
}

// create POSTs obj to the collection at path; it reports whether the object was created (false: it existed).
func (c *hubClient) create(ctx context.Context, path string, obj []byte) (bool, error) {
	code, body, err := c.do(ctx, http.MethodPost, path, obj)
	if err != nil {
		return false, fmt.Errorf("POST %s: %w", path, err)
	}
	switch code {
	case http.StatusCreated, http.StatusOK:
		return true, nil
	case http.StatusConflict:
		if statusReason(body) == "AlreadyExists" {
			return false, nil
		}
	}
	return false, fmt.Errorf("POST %s: %w", path, statusError(code, body))
}

// statusReason is the reason of a Kubernetes Status body.
func statusReason(body []byte) string {
	var st struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(body, &st)
	return st.Reason
}

// statusError turns an error response (a Kubernetes Status) into an error.
func statusError(code int, body []byte) error {
	var st struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return fmt.Errorf("%s (%d %s)", st.Message, code, st.Reason)
	}
	return fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(string(body)))
}

// condition is the part of a condition the landscape reads.
type condition struct {
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	LastUpdateTime time.Time `json:"lastUpdateTime"`
}

// seedCondition returns the condition typ of Seed name; nil when the Seed or the condition does not exist.
func (c *hubClient) seedCondition(ctx context.Context, name, typ string) (*condition, error) {
	code, body, err := c.do(ctx, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/"+name, nil)
	if err != nil {
		return nil, err
	}
	if code == http.StatusNotFound {
		return nil, nil
	}
	if code != http.StatusOK {
		return nil, statusError(code, body)
	}
	var seed struct {
		Status struct {
			Conditions []condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &seed); err != nil {
		return nil, fmt.Errorf("seed %s: %w", name, err)
	}
	for _, cond := range seed.Status.Conditions {
		if cond.Type == typ {
			return &cond, nil
		}
	}
	return nil, nil
}

// createBootstrapToken creates a bootstrap token for the agent of seed, as `trellisctl seed bootstrap-token create`
// does, and returns it.
func (c *hubClient) createBootstrapToken(ctx context.Context, seed string, validity time.Duration) (string, error) {
	tok, err := auth.NewSeedBootstrapToken(seed, time.Now().Add(validity))
	if err != nil {
		return "", err
	}
	body, err := kjson.Marshal(tok.SecretObject())
	if err != nil {
		return "", err
	}
	created, err := c.create(ctx, "/api/v1/namespaces/"+auth.BootstrapTokenNamespace+"/secrets", body)
	if err != nil {
		return "", fmt.Errorf("bootstrap token for seed %s: %w", seed, err)
	}
	if !created {
		return "", errors.New("bootstrap token: the generated token id exists already")
	}
	return tok.Token(), nil
}

// listLen returns the number of items of the collection at path.
func (c *hubClient) listLen(ctx context.Context, path string) (int, error) {
	code, body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, statusError(code, body)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}
