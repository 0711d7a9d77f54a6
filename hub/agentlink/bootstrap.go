package agentlink

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/csr"
	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// bootstrap serves a stream authenticated with a bootstrap token: one CertificateRequest in, one Certificate out, and
// the token is consumed.
func (s *Server) bootstrap(ctx context.Context, id Identity, stream agentv1.AgentService_ConnectServer) error {
	msg, err := s.recvTimeout(ctx, stream, 30*time.Second)
	if err != nil {
		return err
	}
	req := msg.GetCertificateRequest()
	if req == nil {
		return status.Errorf(codes.PermissionDenied, "a bootstrap token may only send a CertificateRequest, got %s", messageName(msg))
	}
	cert, err := s.issue(ctx, id.User, req)
	if err != nil {
		return err
	}
	// Bootstrap tokens are single-purpose: consumed once the certificate exists, before it is sent, so the token
	// cannot be used again even by a client racing the answer. Should the answer be lost, the CSR stays recorded and
	// the operator issues a new token.
	if _, _, err := s.colls.secrets.Delete(ctx, "kube-system", "bootstrap-token-"+id.BootstrapTokenID, nil); err != nil && !apierrors.IsNotFound(err) {
		return status.Errorf(codes.Unavailable, "consume bootstrap token %s: %v", id.BootstrapTokenID, err)
	}
	if err := stream.Send(&agentv1.HubMessage{Message: &agentv1.HubMessage_Certificate{Certificate: cert}}); err != nil {
		return err
	}
	s.cfg.Log.Info("agent bootstrapped", "csr", cert.GetCsrName(), "token", id.BootstrapTokenID)
	return nil
}

// issue records a CertificateSigningRequest for req on behalf of user and waits until the leader's CSR controller has
// approved and signed it. A request the controller would not approve is refused at once with the reason; it stays
// recorded, unapproved, for operators to see.
func (s *Server) issue(ctx context.Context, user string, req *agentv1.CertificateRequest) (*agentv1.Certificate, error) {
	x, err := pki.ParseCSR(req.GetCsr())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "certificate_request.csr: %v", err)
	}
	if e := req.GetExpirationSeconds(); e != 0 && e < 600 {
		return nil, status.Errorf(codes.InvalidArgument, "certificate_request.expiration_seconds: must be at least 600, got %d", e)
	}
	obj := &certificatesv1.CertificateSigningRequest{
		Metadata: &metav1.ObjectMeta{Name: csr.Name(x, req.GetUsages())},
		Spec: &certificatesv1.CertificateSigningRequestSpec{
			Request: req.GetCsr(), SignerName: csr.SignerName, Usages: req.GetUsages(), Username: user,
			Groups: groupsOf(user),
		},
	}
	if e := req.GetExpirationSeconds(); e > 0 {
		obj.Spec.ExpirationSeconds = proto.Int32(e)
	}
	name := obj.Metadata.Name
	stored, err := s.colls.csrs.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		stored, err = s.colls.csrs.Get(ctx, "", name)
		if err == nil && string(stored.(*certificatesv1.CertificateSigningRequest).GetSpec().GetRequest()) != string(req.GetCsr()) {
			return nil, status.Errorf(codes.AlreadyExists, "certificate signing request %s exists with another request", name)
		}
	}
	if err != nil {
		return nil, err
	}
	decider := csr.Controller{CSRs: s.colls.csrs, Secrets: s.colls.secrets}
	cur := stored.(*certificatesv1.CertificateSigningRequest)
	if len(cur.GetStatus().GetCertificate()) == 0 {
		if _, reason := decider.Decide(ctx, cur); reason != "" {
			return nil, status.Errorf(codes.PermissionDenied, "certificate signing request %s is not approved: %s", name, reason)
		}
	}
	certPEM, err := s.waitSigned(ctx, name)
	if err != nil {
		return nil, err
	}
	return &agentv1.Certificate{CsrName: name, CertificatePem: certPEM, CaPem: s.cfg.CA.BundlePEM()}, nil
}

func groupsOf(user string) []string {
	if len(user) > len(csr.BootstrapUserPrefix) && user[:len(csr.BootstrapUserPrefix)] == csr.BootstrapUserPrefix {
		return []string{"system:bootstrappers", "system:authenticated"}
	}
	return []string{auth.SeedsGroup, "system:authenticated"}
}

// waitSigned watches the CSR until it holds a certificate, is denied or failed, or the approval timeout passes.
func (s *Server) waitSigned(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApprovalTimeout)
	defer cancel()
	for {
		w, err := s.colls.csrs.Watch(ctx, "", store.WatchOptions{Fields: fields.OneTermEqualSelector("metadata.name", name)})
		if err != nil {
			return nil, waitError(ctx, name, err)
		}
		for ev := range w.Events() {
			c, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok || c.GetMetadata().GetName() != name {
				continue
			}
			if ev.Type == store.Deleted {
				w.Stop()
				return nil, status.Errorf(codes.Aborted, "certificate signing request %s was deleted", name)
			}
			if cert := c.GetStatus().GetCertificate(); len(cert) > 0 {
				w.Stop()
				return cert, nil
			}
			for _, cond := range c.GetStatus().GetConditions() {
				if (cond.GetType() == "Denied" || cond.GetType() == "Failed") && cond.GetStatus() == "True" {
					w.Stop()
					return nil, status.Errorf(codes.PermissionDenied, "certificate signing request %s was %s: %s", name, cond.GetType(), cond.GetMessage())
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, waitError(ctx, name, ctx.Err())
		}
	}
}

func waitError(ctx context.Context, name string, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return status.Errorf(codes.DeadlineExceeded, "certificate signing request %s was not approved in time (is a hub leader running?)", name)
	}
	return fmt.Errorf("wait for certificate signing request %s: %w", name, err)
}

func messageName(m *agentv1.AgentMessage) string {
	switch m.GetMessage().(type) {
	case *agentv1.AgentMessage_Hello:
		return "Hello"
	case *agentv1.AgentMessage_Heartbeat:
		return "Heartbeat"
	case *agentv1.AgentMessage_Ack:
		return "Ack"
	case *agentv1.AgentMessage_CertificateRequest:
		return "CertificateRequest"
	}
	return "an empty message"
}
