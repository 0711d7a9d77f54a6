package auth

import (
	"context"
	"net/http"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// RequestFromHTTP returns the credentials of an HTTP request: its bearer token and verified client certificates.
func RequestFromHTTP(r *http.Request) Request {
	req := Request{Token: BearerToken(r.Header.Get("Authorization"))}
	if r.TLS != nil {
		req.VerifiedChains = r.TLS.VerifiedChains
	}
	return req
}

// RequestFromGRPC returns the credentials of a gRPC call: the bearer token of its metadata and the verified client
// certificates of its connection. The hub serves gRPC through net/http (grpc.Server.ServeHTTP), which reports the
// connection's TLS state as the peer's credentials.TLSInfo.
func RequestFromGRPC(ctx context.Context) Request {
	var req Request
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			req.Token = BearerToken(v[0])
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			req.VerifiedChains = ti.State.VerifiedChains
		}
	}
	return req
}
