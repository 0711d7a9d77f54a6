// Command sdk shows the generated Go SDK: it connects to a hub over TLS with a bearer token and creates a Project
// and a Shoot (with the Namespace and CloudProfile they need), then reads the Shoot back.
//
//	. .trellis/local/env && go run ./examples/sdk
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func main() {
	hub := strings.TrimPrefix(os.Getenv("TRELLIS_HUB"), "https://")
	ca, err := os.ReadFile(os.Getenv("TRELLIS_CA"))
	if err != nil {
		log.Fatalf("TRELLIS_CA: %v", err)
	}
	conn, err := Dial(hub, ca, os.Getenv("TRELLIS_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	shoot, err := CreateProjectAndShoot(context.Background(), conn, "sdk", "hello")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("shoot %s/%s: kubernetes %s, generation %d, resourceVersion %s\n", shoot.GetMetadata().GetNamespace(),
		shoot.GetMetadata().GetName(), shoot.GetSpec().GetKubernetes().GetVersion(), shoot.GetMetadata().GetGeneration(),
		shoot.GetMetadata().GetResourceVersion())
}

// Dial connects to a hub at addr (host:port), trusting caPEM and sending token with every call.
func Dial(addr string, caPEM []byte, token string) (*grpc.ClientConn, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no CA certificate")
	}
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})),
		grpc.WithPerRPCCredentials(bearer(token)))
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// CreateProjectAndShoot creates Project <project> with namespace garden-<project>, a CloudProfile "sdk-local" and a
// Shoot <shoot> in the project; objects that exist already are reused.
func CreateProjectAndShoot(ctx context.Context, conn *grpc.ClientConn, project, shoot string) (*corev1beta1.Shoot, error) {
	ns := "garden-" + project
	if _, err := kcorev1.NewNamespaceServiceClient(conn).Create(ctx, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: ns}}); ignoreExists(err) != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	_, err := corev1beta1.NewProjectServiceClient(conn).Create(ctx, &corev1beta1.Project{
		Metadata: &metav1.ObjectMeta{Name: project},
		Spec:     &corev1beta1.ProjectSpec{Namespace: &ns},
	})
	if ignoreExists(err) != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	_, err = corev1beta1.NewCloudProfileServiceClient(conn).Create(ctx, &corev1beta1.CloudProfile{
		Metadata: &metav1.ObjectMeta{Name: "sdk-local"},
		Spec: &corev1beta1.CloudProfileSpec{
			Type:       "local",
			Kubernetes: &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.35.4"}}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "local", Versions: []*corev1beta1.MachineImageVersion{{
				Version: "1.0.0", Cri: []*corev1beta1.CRI{{Name: "containerd"}}, Architectures: []string{"amd64"},
			}}}},
			MachineTypes: []*corev1beta1.MachineType{{Name: "local", Cpu: "1", Gpu: "0", Memory: "1Gi"}},
			Regions:      []*corev1beta1.Region{{Name: "local"}},
		},
	})
	if ignoreExists(err) != nil {
		return nil, fmt.Errorf("cloud profile: %w", err)
	}
	minimum, maximum := int32(1), int32(2)
	shoots := corev1beta1.NewShootServiceClient(conn)
	_, err = shoots.Create(ctx, &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Name: shoot, Namespace: ns},
		Spec: &corev1beta1.ShootSpec{
			CloudProfile: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "sdk-local"},
			Region:       "local",
			Kubernetes:   &corev1beta1.Kubernetes{Version: "1.35"}, // completed from the profile to 1.35.4
			Provider: &corev1beta1.Provider{Type: "local", Workers: []*corev1beta1.Worker{{
				Name: "pool", Minimum: &minimum, Maximum: &maximum, Machine: &corev1beta1.Machine{Type: "local"},
			}}},
		},
	})
	if ignoreExists(err) != nil {
		return nil, fmt.Errorf("shoot: %w", err)
	}
	return shoots.Get(ctx, &metav1.GetRequest{Namespace: ns, Name: shoot})
}

func ignoreExists(err error) error {
	if status.Code(err) == codes.AlreadyExists {
		return nil
	}
	return err
}
