// Command widgetcli is trellisctl built with nothing but the kinds the plugin generated from widget.proto, run
// against an in-memory WidgetService over TLS. TestGeneratedCLI compiles it with an overlay (the generated packages
// exist only in its temporary directory) and runs it with a directory and a JSON list of commands; it prints
// "=== command", the command's output and "exit N" for each.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/ctl"
	"github.com/trellis-dev/trellis/ctl/ctlgen/widgettest/kinds"
	"github.com/trellis-dev/trellis/ctl/ctlgen/widgettest/widgetpb"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func main() {
	dir := os.Args[1]
	var commands [][]string
	if err := json.Unmarshal([]byte(os.Args[2]), &commands); err != nil {
		panic(err)
	}
	cert, caPEM := selfSigned()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	widgetpb.RegisterWidgetServiceServer(g, &server{objects: map[string]*widgetpb.Widget{}})
	go func() { _ = g.Serve(lis) }()
	env := map[string]string{"TRELLIS_HUB": lis.Addr().String(), "TRELLIS_CA": ca, "TRELLIS_TOKEN": "t", "HOME": dir}
	for _, args := range commands {
		fmt.Printf("=== %s\n", strings.Join(args, " "))
		code := ctl.Main(context.Background(), args, ctl.Options{Kinds: kinds.All, Getenv: func(k string) string { return env[k] }, Err: os.Stdout})
		fmt.Printf("exit %d\n", code)
	}
	g.Stop()
}

// server keeps widgets in memory: just enough of a kind's service for the CLI's get, apply and subresource.
type server struct {
	widgetpb.UnimplementedWidgetServiceServer
	mu      sync.Mutex
	rv      int
	objects map[string]*widgetpb.Widget
}

func key(ns, name string) string { return ns + "/" + name }

func (s *server) Get(_ context.Context, r *metav1.GetRequest) (*widgetpb.Widget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.objects[key(r.GetNamespace(), r.GetName())]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "widgets.widgets.example %q not found", r.GetName())
	}
	return proto.Clone(w).(*widgetpb.Widget), nil
}

func (s *server) List(_ context.Context, r *metav1.ListRequest) (*widgetpb.WidgetList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &widgetpb.WidgetList{ApiVersion: "widgets.example/v1", Kind: "WidgetList", Metadata: &metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
	for _, w := range s.objects {
		if r.GetNamespace() == "" || w.GetMetadata().GetNamespace() == r.GetNamespace() {
			l.Items = append(l.Items, proto.Clone(w).(*widgetpb.Widget))
		}
	}
	return l, nil
}

func (s *server) Create(_ context.Context, w *widgetpb.Widget) (*widgetpb.Widget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(w.GetMetadata().GetNamespace(), w.GetMetadata().GetName())
	if _, ok := s.objects[k]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "widgets.widgets.example %q already exists", w.GetMetadata().GetName())
	}
	s.rv++
	w.Metadata.ResourceVersion = strconv.Itoa(s.rv)
	w.Metadata.CreationTimestamp = timestamppb.New(time.Now().Add(-time.Hour).Truncate(time.Second))
	s.objects[k] = proto.Clone(w).(*widgetpb.Widget)
	return w, nil
}

// Polish sets the Shiny condition and the spec's color of the widget sent (the CLI merged the user's change into it).
func (s *server) Polish(_ context.Context, w *widgetpb.Widget) (*widgetpb.Widget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(w.GetMetadata().GetNamespace(), w.GetMetadata().GetName())
	old, ok := s.objects[k]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "widgets.widgets.example %q not found", w.GetMetadata().GetName())
	}
	if old.GetMetadata().GetResourceVersion() != w.GetMetadata().GetResourceVersion() {
		return nil, status.Errorf(codes.Aborted, "the object has been modified")
	}
	s.rv++
	w.Metadata.ResourceVersion = strconv.Itoa(s.rv)
	w.Status = &widgetpb.WidgetStatus{Conditions: []*metav1.Condition{{Type: "Shiny", Status: "True"}}}
	s.objects[k] = proto.Clone(w).(*widgetpb.Widget)
	return w, nil
}

// selfSigned returns a serving certificate for 127.0.0.1 and its PEM, which is its own CA.
func selfSigned() (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "widgets"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
