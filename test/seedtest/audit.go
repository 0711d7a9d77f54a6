package seedtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AuditLogName is the file in the seed's directory that WithAuditLog writes.
const AuditLogName = "audit.log"

// auditPolicy records every request at level Metadata (who, verb, resource, response code; no bodies) once, when its
// response is complete (and, for watches, when the response started).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// WithAuditLog makes the kube-apiserver write an audit log of every request (--audit-policy-file,
// --audit-log-path) to Seed.AuditLog, one JSON event a line, level Metadata: the user, the impersonated user, the
// verb, the object's group, resource, subresource, namespace and name, and the response code. Tests read it with
// ReadAuditLog to learn what a client actually did.
func WithAuditLog() Option {
	return func(o *options) { o.audit = true }
}

// configureAudit writes the audit policy into dir and points the apiserver at it and at dir's AuditLogName.
func configureAudit(api *envtest.APIServer, dir string) (string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", err
	}
	path := filepath.Join(dir, AuditLogName)
	args := api.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", path)
	args.Set("audit-log-format", "json")
	// One file for the whole run: the log is read back in full.
	args.Set("audit-log-maxsize", "0")
	return path, nil
}

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests read.
type AuditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	// RequestURI is the request's path and query.
	RequestURI string    `json:"requestURI"`
	User       AuditUser `json:"user"`
	// ImpersonatedUser is the user the request was made as, when User impersonated one.
	ImpersonatedUser *AuditUser `json:"impersonatedUser,omitempty"`
	// ObjectRef is nil for requests to non-resource URLs (/api, /apis, /version, /healthz).
	ObjectRef      *AuditObjectRef `json:"objectRef,omitempty"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus,omitempty"`
}

// AuditUser is an authenticated or impersonated user of an AuditEvent.
type AuditUser struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups,omitempty"`
}

// AuditObjectRef is the object an AuditEvent's request addressed.
type AuditObjectRef struct {
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
}

// Code is the response's HTTP status code, 0 when the event has none.
func (e *AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// ReadAuditLog reads the events of an audit log written with WithAuditLog; a line that is not an event is an error
// naming the line.
func ReadAuditLog(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
