package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// ParseCSR decodes a PEM-encoded PKCS#10 certificate request and checks its signature.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("not a PEM block of type CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	return csr, nil
}

// SignClientCert issues a client certificate for the subject and public key of csr, valid for validity (capped by
// the CA's own lifetime). It returns the certificate in PEM.
func (ca *CA) SignClientCert(csr *x509.CertificateRequest, validity time.Duration) ([]byte, error) {
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      csr.Subject,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign client certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// SessionTicketKey derives the key TLS session tickets are encrypted with from the CA's private key, so that every
// replica, and a replica after a restart, accepts the tickets of the others: agents resume their TLS sessions after
// a hub restart instead of all doing full handshakes at once. Tickets are as secret as the CA key that derives it.
func (ca *CA) SessionTicketKey() ([32]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(append([]byte("trellis tls session ticket key v1\x00"), der...)), nil
}
