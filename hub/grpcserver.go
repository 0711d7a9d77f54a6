package hub

import (
	"crypto/tls"
	"crypto/x509"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// registrars registers every service on several gRPC servers: the one behind the main port's HTTP server and the
// gRPC-only listener's.
type registrars []grpc.ServiceRegistrar

// RegisterService registers on every server.
func (r registrars) RegisterService(desc *grpc.ServiceDesc, impl any) {
	for _, s := range r {
		s.RegisterService(desc, impl)
	}
}

// nativeOptions configure the gRPC-only listener for many long-lived agent connections: TLS with optional client
// certificates (agents present theirs), keepalive pings as often as every 20 s allowed (agents ping every 30 s, also
// without streams), and small per-connection buffers with a shared write buffer — with 10,000 agents the default 32 KiB
// read and write buffers alone would take 640 MB.
//
// A restarted hub meets all its agents at once, and TLS handshakes are what that reconnect storm costs: session tickets
// are encrypted with a key every replica derives from the CA (ticketKey), so agents resume their sessions across
// restarts without certificate verification or signatures, and the key exchange is X25519 (the default hybrid
// post-quantum exchange takes about half the CPU of a full handshake).
func nativeOptions(serving tls.Certificate, clientCAs *x509.CertPool, ticketKey [32]byte) []grpc.ServerOption {
	tc := &tls.Config{
		Certificates:     []tls.Certificate{serving},
		MinVersion:       tls.VersionTLS12,
		ClientAuth:       tls.VerifyClientCertIfGiven,
		ClientCAs:        clientCAs,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	}
	tc.SetSessionTicketKeys([][32]byte{ticketKey})
	return []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(tc)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 20 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.ReadBufferSize(4 << 10),
		grpc.WriteBufferSize(4 << 10), // grpc shares write buffers by default (SharedWriteBuffer is deprecated)
	}
}
