package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/trellis-dev/trellis/agent/identity"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

const (
	// rotationRetry is the pause after a failed rotation (Gardener: 10 s).
	rotationRetry = 10 * time.Second
	// rotationTimeout bounds the wait for the hub's Certificate.
	rotationTimeout = 2 * time.Minute
)

// rotation rotates the session's certificate at its deadline or when the hub asks for it. After a successful rotation
// it ends the session, so that the agent reconnects presenting the new certificate.
func (s *session) rotation(ctx context.Context) {
	for {
		deadline := s.a.rotationDeadline(s.creds)
		t := time.NewTimer(time.Until(deadline))
		var reason string
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			reason = "rotation deadline " + deadline.UTC().Format(time.RFC3339) + " reached"
		case r := <-s.renew:
			t.Stop()
			reason = "the hub requested a renewal: " + r
		}
		err := s.rotate(ctx, reason)
		if err == nil {
			s.cancel(errRotated)
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Error("client certificate rotation failed; retrying", "err", err, "retryIn", rotationRetry)
		t = time.NewTimer(rotationRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// rotate requests a certificate for a new key on the session, stores it in the seed Secret and makes it the one new
// connections present.
func (s *session) rotate(ctx context.Context, reason string) error {
	s.log.Info("rotating the client certificate", "reason", reason, "notAfter", s.creds.NotAfter())
	req, err := identity.NewRequest(s.a.seedName)
	if err != nil {
		return err
	}
	select { // a late answer to an earlier attempt is not for this key
	case <-s.certs:
	default:
	}
	err = s.send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_CertificateRequest{CertificateRequest: &agentv1.CertificateRequest{
		Csr: req.CSRPEM, Usages: identity.Usages, ExpirationSeconds: s.a.expirationSeconds(),
	}}})
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("the session ended before the certificate request was sent")
		}
		return fmt.Errorf("send certificate request: %w", err)
	}
	s.a.csrsSent.Add(1)
	t := time.NewTimer(rotationTimeout)
	defer t.Stop()
	var cert *agentv1.Certificate
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("no certificate from the hub within %v", rotationTimeout)
	case cert = <-s.certs:
	}
	creds, err := s.a.complete(req, cert)
	if err != nil {
		return err
	}
	if err := s.a.secrets.Save(ctx, creds); err != nil {
		return fmt.Errorf("store rotated credentials: %w", err)
	}
	s.a.useCredentials(creds)
	s.log.Info("client certificate rotated", "csr", cert.GetCsrName(), "notAfter", creds.NotAfter(),
		"nextRotation", s.a.rotationDeadline(creds))
	return nil
}
