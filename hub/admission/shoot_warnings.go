package admission

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// credentialsRotationInterval is gardener-apiserver's --shoot-credentials-rotation-interval default: a shoot older
// than this whose credentials were not rotated within it is warned about on update.
const credentialsRotationInterval = 90 * 24 * time.Hour

// The documentation that Gardener's rotation warnings point to.
const rotationDocs = "https://github.com/gardener/gardener/blob/master/docs/usage/shoot-operations/shoot_credentials_rotation.md"

// warnShoot is shootWarnings now.
func warnShoot(s, old *corev1beta1.Shoot) []string { return shootWarnings(s, old, time.Now()) }

// shootWarnings are gardener-apiserver's warnings for a Shoot write (its strategy's WarningsOnCreate and
// WarningsOnUpdate, Gardener's pkg/api/core/shoot GetWarnings), with Gardener's texts: deprecated fields the shoot
// sets, and on update credentials whose rotation is due or whose rotation was left incomplete. old is nil on create.
func shootWarnings(s, old *corev1beta1.Shoot, now time.Time) []string {
	var w []string
	if old != nil {
		w = append(w, dueRotationWarnings(s, now)...)
		w = append(w, incompleteRotationWarnings(s, now)...)
	}
	spec, k8s := s.GetSpec(), s.GetSpec().GetKubernetes()
	if spec == nil {
		return w
	}
	v, verr := version.ParseGeneric(k8s.GetVersion())
	atLeast := func(minor uint) bool { return verr == nil && v.AtLeast(version.MajorMinor(1, minor)) }
	if kcm := k8s.GetKubeControllerManager(); kcm != nil && kcm.PodEvictionTimeout != nil {
		w = append(w, "you are setting the spec.kubernetes.kubeControllerManager.podEvictionTimeout field. The field does not have effect since Kubernetes 1.13 and is forbidden to be set starting from Kubernetes 1.33. Instead, use the spec.kubernetes.kubeAPIServer.(defaultNotReadyTolerationSeconds/defaultUnreachableTolerationSeconds) fields.")
	}
	if op := s.GetMetadata().GetAnnotations()[annotationOperation]; op == "rotate-etcd-encryption-key-start" || op == "rotate-etcd-encryption-key-complete" {
		w = append(w, fmt.Sprintf("you are setting the operation annotation to %s. This annotation has been deprecated and is forbidden to be set starting from Kubernetes 1.34. Instead, use the rotate-etcd-encryption-key annotation, which performs a full rotation of the ETCD encryption key.", op))
	}
	if ca := k8s.GetClusterAutoscaler(); verr == nil && !atLeast(33) && ca != nil && ca.MaxEmptyBulkDelete != nil {
		w = append(w, "you are setting the spec.kubernetes.clusterAutoscaler.maxEmptyBulkDelete field. The field has been deprecated and is forbidden to be set starting from Kubernetes 1.33. The value is not used and will be set to nil. Instead, use the spec.kubernetes.clusterAutoscaler.maxScaleDownParallelism field.")
	}
	if atLeast(33) && spec.GetCloudProfileName() != "" {
		w = append(w, "you are setting the spec.cloudProfileName field. The field is deprecated and will be forcefully set empty starting with Kubernetes 1.34. Use the new spec.cloudProfile.name field instead.")
	}
	if spec.Addons != nil {
		w = append(w, "you are setting the spec.addons field. The field is deprecated and will be forbidden starting with Kubernetes 1.35.")
	}
	if k8s.GetKubeProxy().GetMode() == "IPVS" {
		if atLeast(35) {
			w = append(w, "you are using IPVS mode for kube-proxy. The IPVS mode is deprecated starting with Kubernetes 1.35. Please switch to iptables or nftables mode.")
		} else if old != nil && old.GetSpec().GetKubernetes().GetKubeProxy().GetMode() != "IPVS" {
			w = append(w, "you have switched to IPVS mode for kube-proxy. The IPVS mode is deprecated starting with Kubernetes 1.35. Please switch to iptables or nftables mode.")
		}
	}
	if ks := k8s.GetKubeScheduler(); ks != nil && ks.KubeMaxPdVols != nil {
		w = append(w, "you are setting the spec.kubernetes.kubeScheduler.kubeMaxPDVols field. The field has been deprecated and is forbidden to be set starting from Kubernetes 1.35. The kubeMaxPDVols configuration is no longer necessary as values are set by the respective CSI driver.")
	}
	if spec.SecretBindingName != nil {
		w = append(w, "spec.secretBindingName is deprecated and will be disallowed starting with Kubernetes 1.34. For migration instructions, see: https://github.com/gardener/gardener/blob/master/docs/usage/shoot-operations/secretbinding-to-credentialsbinding-migration.md")
	}
	if api := k8s.GetKubeApiServer(); api != nil {
		p := field.NewPath("spec", "kubernetes", "kubeAPIServer")
		if api.EnableAnonymousAuthentication != nil {
			w = append(w, fmt.Sprintf("you are setting the %s field. The field is deprecated. Using Kubernetes v1.32 and above, please use anonymous authentication configuration. See: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#anonymous-authenticator-configuration", p.Child("enableAnonymousAuthentication")))
		}
		if wcs := api.GetWatchCacheSizes(); wcs != nil && wcs.Default != nil {
			w = append(w, fmt.Sprintf("you are setting the %s field. The field has been deprecated and is forbidden to be set starting from Kubernetes 1.35. The cache size is automatically sized by the kube-apiserver.", p.Child("watchCacheSizes", "default")))
		}
		if d, err := time.ParseDuration(api.GetEventTtl()); err == nil && d > 24*time.Hour {
			w = append(w, fmt.Sprintf("you are setting the %s field to an invalid value. Invalid value: '%s', valid values: [0, 24h]. Invalid values for existing resources will be no longer allowed in Gardener v1.142.0. See: https://github.com/gardener/gardener/issues/13825", p.Child("eventTTL"), d))
		}
	}
	for i, dp := range spec.GetDns().GetProviders() {
		if dp.SecretName != nil {
			p := field.NewPath("spec", "dns", "providers").Index(i)
			w = append(w, fmt.Sprintf("you are setting the %s field. The field is deprecated and is forbidden to be set starting from Kubernetes 1.35. Use %s instead.", p.Child("secretName"), p.Child("credentialsRef")))
		}
	}
	return w
}

// dueRotationWarnings recommends rotating the credentials not rotated within credentialsRotationInterval, for a shoot
// older than that.
func dueRotationWarnings(s *corev1beta1.Shoot, now time.Time) []string {
	if !olderThan(s.GetMetadata().GetCreationTimestamp(), credentialsRotationInterval, now) {
		return nil
	}
	r := s.GetStatus().GetCredentials().GetRotation()
	if r == nil {
		return []string{"you should consider rotating the shoot credentials, see " + rotationDocs + "#gardener-provided-credentials for details"}
	}
	due := func(present bool, initiated *timestamppb.Timestamp) bool {
		return !present || initiated == nil || olderThan(initiated, credentialsRotationInterval, now)
	}
	var w []string
	if due(r.CertificateAuthorities != nil, r.GetCertificateAuthorities().GetLastInitiationTime()) {
		w = append(w, "you should consider rotating the certificate authorities, see "+rotationDocs+"#certificate-authorities for details")
	}
	if due(r.EtcdEncryptionKey != nil, r.GetEtcdEncryptionKey().GetLastInitiationTime()) {
		w = append(w, "you should consider rotating the ETCD encryption key, see "+rotationDocs+"#etcd-encryption-key for details")
	}
	if s.GetSpec().GetPurpose() != "testing" && due(r.Observability != nil, r.GetObservability().GetLastInitiationTime()) {
		w = append(w, "you should consider rotating the observability passwords, see "+rotationDocs+"#observability-passwords-for-plutono for details")
	}
	if due(r.ServiceAccountKey != nil, r.GetServiceAccountKey().GetLastInitiationTime()) {
		w = append(w, "you should consider rotating the ServiceAccount token signing key, see "+rotationDocs+"#serviceaccount-token-signing-key for details")
	}
	if shootEnablesSSHAccess(s) && due(r.SshKeypair != nil, r.GetSshKeypair().GetLastInitiationTime()) {
		w = append(w, "you should consider rotating the SSH keypair, see "+rotationDocs+"#ssh-key-pair-for-worker-nodes for details")
	}
	return w
}

// incompleteRotationWarnings asks to complete the two-phase rotations whose preparation finished more than a third of
// credentialsRotationInterval ago without a completion triggered since.
func incompleteRotationWarnings(s *corev1beta1.Shoot, now time.Time) []string {
	r := s.GetStatus().GetCredentials().GetRotation()
	if r == nil {
		return nil
	}
	interval := credentialsRotationInterval / 3
	due := func(finished, triggered *timestamppb.Timestamp) bool {
		if finished == nil || triggered != nil && triggered.AsTime().After(finished.AsTime()) {
			return false
		}
		return olderThan(finished, interval, now)
	}
	warn := func(what string) string {
		return fmt.Sprintf("the %s rotation initiation was finished more than %s ago and should be completed", what, interval)
	}
	var w []string
	if ca := r.GetCertificateAuthorities(); ca != nil && due(ca.GetLastInitiationFinishedTime(), ca.GetLastCompletionTriggeredTime()) {
		w = append(w, warn("certificate authorities"))
	}
	if k := r.GetEtcdEncryptionKey(); k != nil && due(k.GetLastInitiationFinishedTime(), k.GetLastCompletionTriggeredTime()) {
		w = append(w, warn("ETCD encryption key"))
	}
	if k := r.GetServiceAccountKey(); k != nil && due(k.GetLastInitiationFinishedTime(), k.GetLastCompletionTriggeredTime()) {
		w = append(w, warn("ServiceAccount token signing key"))
	}
	return w
}

// olderThan reports whether t lies more than d before now.
func olderThan(t *timestamppb.Timestamp, d time.Duration, now time.Time) bool {
	return t != nil && t.AsTime().Add(d).Before(now)
}
