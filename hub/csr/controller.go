package csr

import (
	"context"
	"crypto/x509"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/pki"
	"github.com/trellis-dev/trellis/hub/store"
	certificatesv1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/certificates/v1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// Resources the controller works on.
var (
	Resource        = schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	secretsResource = schema.GroupResource{Resource: "secrets"}
)

// Source gives the controller the store's collections.
type Source interface {
	Collection(gr schema.GroupResource) (*store.Collection, bool)
}

// Signer signs client certificates: the hub's pki.Authority, which signs with the new CA once a rotation started.
type Signer interface {
	SignClientCert(csr *x509.CertificateRequest, validity time.Duration) ([]byte, error)
}

// Controller approves and signs seed client CSRs. Run it in the leader only.
type Controller struct {
	CSRs, Secrets *store.Collection
	CA            Signer
	// MaxValidity caps the validity of issued certificates (default one year, Kubernetes' signing duration).
	MaxValidity time.Duration
	Log         *slog.Logger
	// Now is the clock of the cleanup (tests move it).
	Now func() time.Time
}

// NewController returns a controller over src's collections.
func NewController(src Source, ca Signer, log *slog.Logger) *Controller {
	csrs, _ := src.Collection(Resource)
	secrets, _ := src.Collection(secretsResource)
	return &Controller{CSRs: csrs, Secrets: secrets, CA: ca, MaxValidity: 365 * 24 * time.Hour, Log: log, Now: time.Now}
}

// Run handles every CSR, now and as they change, and cleans up old ones every ten minutes, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	go func() {
		t := time.NewTicker(10 * time.Minute)
		defer t.Stop()
		for {
			c.Cleanup(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	for ctx.Err() == nil {
		w, err := c.CSRs.Watch(ctx, "", store.WatchOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.Log.Warn("csr controller: watch failed", "err", err)
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.Events() {
			if ev.Type == store.Added || ev.Type == store.Modified {
				c.handle(ctx, ev.Object.(*certificatesv1.CertificateSigningRequest))
			}
		}
		w.Stop()
	}
	return nil
}

// Decide returns the seed of a CSR that is to be approved, or a reason for leaving it alone ("" seed).
func (c *Controller) Decide(ctx context.Context, req *certificatesv1.CertificateSigningRequest) (string, string) {
	if len(req.GetStatus().GetCertificate()) > 0 {
		return "", "already signed"
	}
	for _, cond := range req.GetStatus().GetConditions() {
		if cond.GetType() == "Approved" || cond.GetType() == "Denied" || cond.GetType() == "Failed" {
			return "", "already " + strings.ToLower(cond.GetType())
		}
	}
	spec := req.GetSpec()
	if spec.GetSignerName() != SignerName {
		return "", "signer is not " + SignerName
	}
	x, err := pki.ParseCSR(spec.GetRequest())
	if err != nil {
		return "", err.Error()
	}
	seed, err := SeedOf(x, spec.GetUsages())
	if err != nil {
		return "", err.Error()
	}
	var desc string
	if id, ok := strings.CutPrefix(spec.GetUsername(), BootstrapUserPrefix); ok {
		obj, err := c.Secrets.Get(ctx, "kube-system", "bootstrap-token-"+id)
		if err != nil {
			return "", "bootstrap token " + id + " not found"
		}
		desc = string(obj.(*kcorev1.Secret).GetData()["description"])
	}
	if err := CheckRequester(seed, spec.GetUsername(), desc); err != nil {
		return "", err.Error()
	}
	return seed, ""
}

func (c *Controller) handle(ctx context.Context, req *certificatesv1.CertificateSigningRequest) {
	name := req.GetMetadata().GetName()
	seed, reason := c.Decide(ctx, req)
	if seed == "" {
		c.Log.Debug("csr not auto-approved", "csr", name, "reason", reason)
		return
	}
	x, _ := pki.ParseCSR(req.GetSpec().GetRequest())
	validity := c.MaxValidity
	if e := req.GetSpec().ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < validity {
		validity = time.Duration(*e) * time.Second
	}
	certPEM, err := c.CA.SignClientCert(x, validity)
	if err != nil {
		c.Log.Error("csr: signing failed", "csr", name, "err", err)
		return
	}
	now := &timestamppb.Timestamp{Seconds: time.Now().Unix()} // metav1.Time has whole seconds
	_, err = c.CSRs.GuaranteedUpdate(ctx, "", name, true, func(cur store.Object) (store.Object, error) {
		next := proto.Clone(cur).(*certificatesv1.CertificateSigningRequest)
		if len(next.GetStatus().GetCertificate()) > 0 {
			return nil, nil // signed meanwhile
		}
		if next.Status == nil {
			next.Status = &certificatesv1.CertificateSigningRequestStatus{}
		}
		next.Status.Conditions = append(next.Status.Conditions, &certificatesv1.CertificateSigningRequestCondition{
			Type: "Approved", Status: "True", Reason: "AutoApproved",
			Message: "Auto approving seed client certificate of seed " + seed + ".", LastUpdateTime: now, LastTransitionTime: now,
		})
		next.Status.Certificate = certPEM
		return next, nil
	})
	switch {
	case err == nil:
		c.Log.Info("csr approved and signed", "csr", name, "seed", seed, "requester", req.GetSpec().GetUsername())
	case apierrors.IsNotFound(err):
	default:
		c.Log.Warn("csr: approval failed", "csr", name, "err", err)
	}
}

// Retention of CSRs, as kube-controller-manager's CSR cleaner keeps them: decided ones (approved, denied, failed) for
// an hour, pending ones for a day.
const (
	decidedRetention = time.Hour
	pendingRetention = 24 * time.Hour
)

// Cleanup deletes CSRs past their retention, so a fleet's bootstraps and rotations do not pile up.
func (c *Controller) Cleanup(ctx context.Context) int {
	res, err := c.CSRs.List(ctx, "", store.ListOptions{})
	if err != nil {
		return 0
	}
	now := c.Now()
	deleted := 0
	for _, obj := range res.Items {
		req := obj.(*certificatesv1.CertificateSigningRequest)
		created := req.GetMetadata().GetCreationTimestamp().AsTime()
		keep := pendingRetention
		if len(req.GetStatus().GetCertificate()) > 0 || len(req.GetStatus().GetConditions()) > 0 {
			keep = decidedRetention
		}
		if now.Sub(created) < keep {
			continue
		}
		if _, _, err := c.CSRs.Delete(ctx, "", req.GetMetadata().GetName(), nil); err == nil {
			deleted++
		}
	}
	if deleted > 0 {
		c.Log.Info("cleaned up certificate signing requests", "deleted", deleted)
	}
	return deleted
}
