package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
)

// Where the shoots live: the example project's namespace.
const (
	shootNamespace = "garden-local"
	shootsPath     = "/apis/core.gardener.cloud/v1beta1/namespaces/" + shootNamespace + "/shoots"
)

// hubClient is an admin client of the hub's REST API over one HTTP/2 connection: requests, and the watch.
type hubClient struct {
	url, token string
	http       *http.Client // requests, each bounded by requestTimeout
	stream     *http.Client // the watch, unbounded
}

const requestTimeout = 30 * time.Second

func newHubClient(url, caFile, token string) (*hubClient, error) {
	pool, err := binproc.LoadCA(caFile)
	if err != nil {
		return nil, err
	}
	c := binproc.HTTPClient(pool, requestTimeout)
	return &hubClient{url: url, token: token, http: c, stream: &http.Client{Transport: c.Transport}}, nil
}

// do sends a request with a JSON body (a merge patch for PATCH) and returns the status code and the answer.
func (c *hubClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return binproc.Do(ctx, c.http, method, c.url+path, c.token, body)
}

// must sends a request and fails unless the answer has one of the codes in want.
func (c *hubClient) must(ctx context.Context, method, path string, body []byte, want ...int) ([]byte, error) {
	code, out, err := c.do(ctx, method, path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for _, w := range want {
		if code == w {
			return out, nil
		}
	}
	return nil, &statusError{method: method, path: path, code: code, body: out}
}

// statusError is an answer with an unexpected status code.
type statusError struct {
	method, path string
	code         int
	body         []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.code, bytes.TrimSpace(e.body))
}

func isStatus(err error, code int) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == code
}
