package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/trellis-dev/trellis/agent/identity"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// bootstrapTimeout bounds one bootstrap exchange: the hub answers once its CSR controller approved and signed.
const bootstrapTimeout = 2 * time.Minute

// ErrNoCredentials is the error of a connection attempt when the seed holds no credentials and no bootstrap token is
// configured. The agent keeps retrying: an operator may create the kubeconfig Secret or configure a token file.
var ErrNoCredentials = errors.New("no credentials: the kubeconfig secret does not exist and no bootstrap token is configured (hubClientConnection.bootstrapToken or bootstrapTokenFile)")

// BootstrapError is a certificate request the hub refused during bootstrap, e.g. PermissionDenied "token expired".
type BootstrapError struct {
	// Err is the hub's status error.
	Err error
}

func (e *BootstrapError) Error() string {
	st := status.Convert(e.Err)
	return fmt.Sprintf("bootstrap: the hub refused the certificate request (%s: %s); check hubClientConnection.bootstrapToken(File) — the agent retries and re-reads the token file", st.Code(), st.Message())
}

func (e *BootstrapError) Unwrap() error { return e.Err }

// bootstrap gets the first client certificate: a CSR over a connection authenticated with the bootstrap token. On
// success the credentials are stored in the seed Secret and used for new connections, and it returns errReconnect.
func (a *Agent) bootstrap(ctx context.Context) error {
	token, err := a.cfg.HubClientConnection.Token()
	if err != nil {
		return err
	}
	if token == "" {
		return fmt.Errorf("%w; secret %s", ErrNoCredentials, a.cfg.HubClientConnection.KubeconfigSecret.String())
	}
	req, err := identity.NewRequest(a.seedName)
	if err != nil {
		return err
	}
	conn, err := a.dial(a.creds.Get(), false) // a held (expired) kubeconfig still knows the hub's CA
	if err != nil {
		return err
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	stream, err := agentv1.NewAgentServiceClient(conn).Connect(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap: connect: %w", err)
	}
	a.log.Info("bootstrapping: requesting a client certificate", "subject", identity.Subject(a.seedName).String())
	err = stream.Send(&agentv1.AgentMessage{Message: &agentv1.AgentMessage_CertificateRequest{CertificateRequest: &agentv1.CertificateRequest{
		Csr:               req.CSRPEM,
		Usages:            identity.Usages,
		ExpirationSeconds: a.expirationSeconds(),
	}}})
	if err != nil && !errors.Is(err, io.EOF) { // on EOF the hub ended the stream; Recv says why
		return fmt.Errorf("bootstrap: send certificate request: %w", err)
	}
	a.csrsSent.Add(1)
	msg, err := stream.Recv()
	if err != nil {
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.FailedPrecondition:
			return &BootstrapError{Err: err}
		}
		return fmt.Errorf("bootstrap: %w", err)
	}
	cert := msg.GetCertificate()
	if cert == nil {
		return fmt.Errorf("bootstrap: the hub answered the certificate request with %T", msg.GetMessage())
	}
	_ = stream.CloseSend()
	creds, err := a.complete(req, cert)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := a.secrets.Save(ctx, creds); err != nil {
		return fmt.Errorf("bootstrap: store credentials: %w", err)
	}
	a.useCredentials(creds)
	a.log.Info("bootstrapped: client certificate stored", "csr", cert.GetCsrName(), "notAfter", creds.NotAfter(),
		"secret", a.cfg.HubClientConnection.KubeconfigSecret.String())
	return errReconnect
}

// complete checks a signed certificate for req and turns it into credentials. Without a CA in the answer the
// configured CA bundle is kept.
func (a *Agent) complete(req *identity.Request, cert *agentv1.Certificate) (*identity.Credentials, error) {
	ca := cert.GetCaPem()
	if len(ca) == 0 {
		if cur := a.creds.Get(); cur != nil {
			ca = cur.CAPEM
		} else {
			ca, _ = a.cfg.HubClientConnection.CAPEM() // read once already by dial
		}
	}
	creds, err := req.Complete(a.server, ca, cert.GetCertificatePem())
	if err != nil {
		return nil, err
	}
	if err := creds.CheckSubject(a.seedName); err != nil {
		return nil, err
	}
	return creds, nil
}

// expirationSeconds is the requested validity in seconds (Validate bounds it to int32).
func (a *Agent) expirationSeconds() int32 {
	return int32(a.cfg.HubClientConnection.KubeconfigValidity.Validity.Duration / time.Second)
}
