package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
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
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	return &hubClient{url: url, token: token, http: &http.Client{Timeout: requestTimeout, Transport: tr}, stream: &http.Client{Transport: tr}}, nil
}

// do sends a request with a JSON body (a merge patch for PATCH) and returns the status code and the answer.
func (c *hubClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
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
