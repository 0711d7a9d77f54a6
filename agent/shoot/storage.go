package shoot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	storagev1ac "k8s.io/client-go/applyconfigurations/storage/v1"

	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
)

// The storage of a shoot of provider type local with workers: what Gardener's provider-local deploys into its shoots
// (its ManagedResources shoot-system-components and shoot-storageclasses): rancher's local-path-provisioner in
// kube-system and the default StorageClass "standard" it serves. Trellis has no resource manager that would apply an
// extension's manifests into a shoot, so the agent applies them, as it does kube-proxy and CoreDNS.
const (
	taskLocalStorage = "Deploying the local provider's storage system component"

	providerLocal        = "local"
	localPathProvisioner = "local-path-provisioner"
	localPathConfig      = "local-path-config"
	localPathAccount     = "local-path-provisioner-service-account"
	localPathRole        = "system:local-path-provisioner"
	storageClassStandard = "standard"
	provisionerLocalPath = "rancher.io/local-path"
	// LocalStorageRoot is the machines' directory of the volumes: one directory per shoot (its UID,
	// LocalStoragePath), a directory per volume in it.
	LocalStorageRoot = "/var/lib/local-path-provisioner"
)

// localStorage reports whether the shoot gets the local provider's storage: provider type local, with workers.
func (op *operation) localStorage() bool {
	return op.shoot.GetSpec().GetProvider().GetType() == providerLocal && len(op.shoot.GetSpec().GetProvider().GetWorkers()) > 0
}

// LocalStoragePath is the directory on the shoot's machines that holds the volumes of the shoot with UID uid.
func LocalStoragePath(uid string) string { return path.Join(LocalStorageRoot, uid) }

// localPathConfigData is local-path-provisioner's configuration: every node keeps its volumes under dir, made and
// removed by helper pods of helperImage.
func localPathConfigData(dir, helperImage string) (map[string]string, error) {
	cfg, err := json.Marshal(map[string]any{"nodePathMap": []any{map[string]any{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []string{dir}}}})
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"config.json": string(cfg),
		"setup":       "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
		"teardown":    "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
		"helperPod.yaml": fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  tolerations:
  - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
  containers:
  - name: helper-pod
    image: %s
    imagePullPolicy: IfNotPresent
`, helperImage),
	}, nil
}

// deployLocalStorage applies local-path-provisioner and the default StorageClass into a shoot of provider type
// local with workers.
func (op *operation) deployLocalStorage(ctx context.Context) error {
	return op.inShoot(ctx, func(cs clientset) error { return op.applyLocalStorage(ctx, cs) })
}

func (op *operation) applyLocalStorage(ctx context.Context, cs clientset) error {
	img, err := op.image(imagevector.LocalPathProvisioner)
	if err != nil {
		return err
	}
	helper, err := op.image(imagevector.LocalPathHelper)
	if err != nil {
		return err
	}
	data, err := localPathConfigData(LocalStoragePath(op.shoot.GetMetadata().GetUid()), helper)
	if err != nil {
		return err
	}
	sys := kmetav1.NamespaceSystem
	selector := map[string]string{"app": localPathProvisioner}
	labels := mergeLabels(selector, systemLabels)
	sum := sha256.Sum256([]byte(data["config.json"] + "\x00" + data["helperPod.yaml"]))
	read := []string{"get", "list", "watch"}
	apply := []func() error{
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Apply(ctx, rbacv1ac.ClusterRole(localPathRole).WithLabels(systemLabels).WithRules(
				rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log").WithVerbs(read...),
				rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("persistentvolumes").WithVerbs("get", "list", "watch", "create", "patch", "update", "delete"),
				rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("events").WithVerbs("create", "patch"),
				rbacv1ac.PolicyRule().WithAPIGroups(storagev1.GroupName).WithResources("storageclasses").WithVerbs(read...)), applyOptions)
			return err
		},
		func() error { return applyServiceAccount(ctx, cs, localPathAccount, localPathRole, localPathRole) },
		// The helper pods run in the provisioner's namespace.
		func() error {
			_, err := cs.RbacV1().Roles(sys).Apply(ctx, rbacv1ac.Role(localPathRole, sys).WithLabels(systemLabels).WithRules(
				rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods").WithVerbs("get", "list", "watch", "create", "patch", "update", "delete")), applyOptions)
			return err
		},
		func() error {
			_, err := cs.RbacV1().RoleBindings(sys).Apply(ctx, rbacv1ac.RoleBinding(localPathRole, sys).WithLabels(systemLabels).
				WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(localPathRole)).
				WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(localPathAccount).WithNamespace(sys)), applyOptions)
			return err
		},
		func() error {
			_, err := cs.CoreV1().ConfigMaps(sys).Apply(ctx, corev1ac.ConfigMap(localPathConfig, sys).WithLabels(labels).WithData(data), applyOptions)
			return err
		},
		func() error {
			_, err := cs.AppsV1().Deployments(sys).Apply(ctx, localPathDeployment(img, hex.EncodeToString(sum[:8]), selector, labels), applyOptions)
			return err
		},
		func() error {
			_, err := cs.StorageV1().StorageClasses().Apply(ctx, localStorageClass(), applyOptions)
			return err
		},
	}
	for _, f := range apply {
		if err := f(); err != nil {
			return fmt.Errorf("shoot: apply local-path-provisioner: %w", err)
		}
	}
	return nil
}

// localStorageClass is the shoot's default StorageClass "standard" of local-path-provisioner: a volume is made on
// the node of its first pod and deleted with its claim.
func localStorageClass() *storagev1ac.StorageClassApplyConfiguration {
	return storagev1ac.StorageClass(storageClassStandard).WithLabels(systemLabels).
		WithAnnotations(map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}).
		WithProvisioner(provisionerLocalPath).
		WithReclaimPolicy(corev1.PersistentVolumeReclaimDelete).
		WithVolumeBindingMode(storagev1.VolumeBindingWaitForFirstConsumer)
}

// localPathDeployment is local-path-provisioner's Deployment; checksum rolls its pod when the configuration changes.
func localPathDeployment(image, checksum string, selector, labels map[string]string) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(localPathProvisioner, kmetav1.NamespaceSystem).WithLabels(labels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithRevisionHistoryLimit(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithAnnotations(map[string]string{"checksum/config": checksum}).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(localPathAccount).
					WithPriorityClassName("system-cluster-critical").
					WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsNonRoot(true).WithRunAsUser(65532).WithRunAsGroup(65532).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(corev1ac.Container().
						WithName(localPathProvisioner).
						WithImage(image).
						WithImagePullPolicy(corev1.PullIfNotPresent).
						WithArgs("start", "--config", "/etc/config/config.json").
						WithEnv(
							corev1ac.EnvVar().WithName("POD_NAMESPACE").WithValueFrom(corev1ac.EnvVarSource().
								WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("metadata.namespace"))),
							corev1ac.EnvVar().WithName("CONFIG_MOUNT_PATH").WithValue("/etc/config/")).
						WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).
							WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))).
						WithVolumeMounts(corev1ac.VolumeMount().WithName("config").WithMountPath("/etc/config/").WithReadOnly(true))).
					WithVolumes(corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(localPathConfig))))))
}
