package admission

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestShootWarnings: gardener-apiserver's warnings for Shoot writes (deprecated fields; on update, credentials
// whose rotation is due or was left incomplete), with Gardener's texts, and none for a shoot that needs none.
func TestShootWarnings(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-d)) }
	const day = 24 * time.Hour
	base := func(version string) *corev1beta1.Shoot {
		return &corev1beta1.Shoot{
			Metadata: &metav1.ObjectMeta{Name: "s", Namespace: "garden-dev", CreationTimestamp: ago(10 * day)},
			Spec: &corev1beta1.ShootSpec{Kubernetes: &corev1beta1.Kubernetes{Version: version}, Purpose: proto.String("testing"),
				Provider: &corev1beta1.Provider{Workers: []*corev1beta1.Worker{{Name: "w"}}}},
		}
	}
	rotated := func(s *corev1beta1.Shoot, at *timestamppb.Timestamp) *corev1beta1.Shoot {
		s.Status = &corev1beta1.ShootStatus{Credentials: &corev1beta1.ShootCredentials{Rotation: &corev1beta1.ShootCredentialsRotation{
			CertificateAuthorities: &corev1beta1.CARotation{LastInitiationTime: at},
			EtcdEncryptionKey:      &corev1beta1.ETCDEncryptionKeyRotation{LastInitiationTime: at},
			ServiceAccountKey:      &corev1beta1.ServiceAccountKeyRotation{LastInitiationTime: at},
			SshKeypair:             &corev1beta1.ShootSSHKeypairRotation{LastInitiationTime: at},
		}}}
		return s
	}
	for _, c := range []struct {
		name     string
		shoot    func() *corev1beta1.Shoot
		update   bool
		want     []string // a piece of each warning, in order
		wantNone bool
	}{
		{name: "a plain new shoot", shoot: func() *corev1beta1.Shoot { return base("1.35.4") }, wantNone: true},
		{name: "deprecated fields", shoot: func() *corev1beta1.Shoot {
			s := base("1.32.5")
			s.Spec.SecretBindingName = proto.String("b")
			s.Spec.Addons = &corev1beta1.Addons{}
			s.Spec.Kubernetes.KubeControllerManager = &corev1beta1.KubeControllerManagerConfig{PodEvictionTimeout: proto.String("2m")}
			s.Spec.Kubernetes.ClusterAutoscaler = &corev1beta1.ClusterAutoscaler{MaxEmptyBulkDelete: proto.Int32(5)}
			s.Spec.Kubernetes.KubeScheduler = &corev1beta1.KubeSchedulerConfig{KubeMaxPdVols: proto.String("20")}
			s.Spec.Kubernetes.KubeApiServer = &corev1beta1.KubeAPIServerConfig{EnableAnonymousAuthentication: proto.Bool(true),
				WatchCacheSizes: &corev1beta1.WatchCacheSizes{Default: proto.Int32(100)}, EventTtl: proto.String("48h")}
			s.Spec.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{{}, {SecretName: proto.String("dns")}}}
			s.Metadata.Annotations = map[string]string{annotationOperation: "rotate-etcd-encryption-key-start"}
			return s
		}, want: []string{
			"spec.kubernetes.kubeControllerManager.podEvictionTimeout", "operation annotation to rotate-etcd-encryption-key-start",
			"spec.kubernetes.clusterAutoscaler.maxEmptyBulkDelete", "spec.addons", "spec.kubernetes.kubeScheduler.kubeMaxPDVols",
			"spec.secretBindingName is deprecated", "spec.kubernetes.kubeAPIServer.enableAnonymousAuthentication",
			"spec.kubernetes.kubeAPIServer.watchCacheSizes.default", "spec.kubernetes.kubeAPIServer.eventTTL field to an invalid value. Invalid value: '48h0m0s'",
			"spec.dns.providers[1].secretName field. The field is deprecated and is forbidden to be set starting from Kubernetes 1.35. Use spec.dns.providers[1].credentialsRef instead.",
		}},
		{name: "cloudProfileName and IPVS from 1.35", shoot: func() *corev1beta1.Shoot {
			s := base("1.35.4")
			s.Spec.CloudProfileName = proto.String("local")
			s.Spec.Kubernetes.KubeProxy = &corev1beta1.KubeProxyConfig{Mode: proto.String("IPVS")}
			return s
		}, want: []string{"spec.cloudProfileName field", "you are using IPVS mode"}},
		{name: "an old shoot never rotated", update: true, shoot: func() *corev1beta1.Shoot {
			s := base("1.35.4")
			s.Metadata.CreationTimestamp = ago(100 * day)
			return s
		}, want: []string{"you should consider rotating the shoot credentials"}},
		{name: "rotations due, observability skipped for testing shoots", update: true, shoot: func() *corev1beta1.Shoot {
			s := rotated(base("1.35.4"), ago(95*day))
			s.Metadata.CreationTimestamp = ago(200 * day)
			return s
		}, want: []string{"rotating the certificate authorities", "rotating the ETCD encryption key", "rotating the ServiceAccount token signing key", "rotating the SSH keypair"}},
		{name: "recent rotations", update: true, shoot: func() *corev1beta1.Shoot {
			s := rotated(base("1.35.4"), ago(5*day))
			s.Metadata.CreationTimestamp = ago(200 * day)
			return s
		}, wantNone: true},
		{name: "a rotation prepared long ago and not completed", update: true, shoot: func() *corev1beta1.Shoot {
			s := rotated(base("1.35.4"), ago(40*day))
			s.Status.Credentials.Rotation.CertificateAuthorities.LastInitiationFinishedTime = ago(31 * day)
			s.Status.Credentials.Rotation.ServiceAccountKey.LastInitiationFinishedTime = ago(31 * day)
			s.Status.Credentials.Rotation.ServiceAccountKey.LastCompletionTriggeredTime = ago(1 * day)
			return s
		}, want: []string{"the certificate authorities rotation initiation was finished more than 720h0m0s ago and should be completed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.shoot()
			var old *corev1beta1.Shoot
			if c.update {
				old = proto.Clone(s).(*corev1beta1.Shoot)
			}
			got := shootWarnings(s, old, now)
			if c.wantNone {
				if len(got) != 0 {
					t.Errorf("warnings: %q", got)
				}
				return
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d warnings, want %d: %q", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
