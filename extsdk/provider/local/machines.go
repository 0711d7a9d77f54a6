package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MachineSpec is what the local machine provider's API (a cloud's VM API for the local landscape) makes a machine
// from: PUT /machines/{name}.
type MachineSpec struct {
	// UserData is the machine's cloud-config user data, with the bootstrap token filled in.
	UserData []byte `json:"userData"`
	// Labels become the machine's Node labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// Machine phases of MachineStatus.
const (
	MachinePhaseRunning = "Running"
	MachinePhaseFailed  = "Failed"
)

// MachineStatus is the machine provider's answer about one machine.
type MachineStatus struct {
	// Name is the machine's name, also its Node's.
	Name string `json:"name"`
	// Phase is MachinePhaseRunning or MachinePhaseFailed.
	Phase string `json:"phase"`
	// Message says why a machine failed.
	Message string `json:"message,omitempty"`
}

// MachineProvider is a client of the local machine provider's HTTP API (test/localmachine serves it): provider-local's
// Worker creates and deletes machines through it, as machine-controller-manager calls a cloud's API.
type MachineProvider struct {
	// URL is the API's base URL, e.g. http://10.226.0.1:8446.
	URL string
	// Token is the bearer token the API requires.
	Token string
	// Client makes the requests; nil: a client with a timeout of 3 minutes (a machine's start is waited for).
	Client *http.Client
}

// Create makes the machine name, or returns the status of the existing one; it returns once the machine runs and
// its kubelet has its client certificate, or with the reason it failed.
func (p *MachineProvider) Create(ctx context.Context, name string, spec MachineSpec) (*MachineStatus, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	st := &MachineStatus{}
	if err := p.do(ctx, http.MethodPut, name, body, st); err != nil {
		return nil, err
	}
	if st.Phase != MachinePhaseRunning {
		return st, fmt.Errorf("machine %s is %s: %s", name, st.Phase, st.Message)
	}
	return st, nil
}

// Delete removes the machine name and everything it made; a machine that does not exist is no error.
func (p *MachineProvider) Delete(ctx context.Context, name string) error {
	err := p.do(ctx, http.MethodDelete, name, nil, nil)
	if errors.Is(err, errMachineNotFound) {
		return nil
	}
	return err
}

var errMachineNotFound = errors.New("machine not found")

func (p *MachineProvider) do(ctx context.Context, method, name string, body []byte, out any) error {
	c := p.Client
	if c == nil {
		c = &http.Client{Timeout: 3 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(p.URL, "/")+"/machines/"+url.PathEscape(name), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("machine provider: %s machine %s: %w", method, name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("machine provider: %s machine %s: %w", method, name, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errMachineNotFound
	case resp.StatusCode >= 300:
		return fmt.Errorf("machine provider: %s machine %s: %s: %s", method, name, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("machine provider: %s machine %s: bad answer: %w", method, name, err)
		}
	}
	return nil
}
