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
func nativeOptions(serving tls.Certificate, clientCAs *x509.CertPool) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{serving},
			MinVersion:   tls.VersionTLS12,
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    clientCAs,
		})),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 20 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.ReadBufferSize(8 << 10),
		grpc.WriteBufferSize(8 << 10),
		grpc.SharedWriteBuffer(true),
	}
}
