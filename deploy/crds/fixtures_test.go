package crds

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Fixtures: one object of every kind with every field set (JSON blobs compact with sorted keys, times in whole
// seconds, so what the seed gives back is equal to what went in). Names and namespaces are set by the test.

var (
	// now is in whole seconds: the seed stores times as RFC 3339 without fractions.
	now = metav1.NewTime(time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC))

	ptrStr   = func(s string) *string { return &s }
	ptrBool  = func(b bool) *bool { return &b }
	ptrInt32 = func(i int32) *int32 { return &i }
	ptrInt64 = func(i int64) *int64 { return &i }
	ptrDur   = func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	ptrQty   = func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	raw      = func(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
	secret   = corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--dev--a"}
)

func defaultSpec(typ string) extensionsv1alpha1.DefaultSpec {
	class := extensionsv1alpha1.ExtensionClassShoot
	return extensionsv1alpha1.DefaultSpec{Type: typ, Class: &class, ProviderConfig: raw(`{"apiVersion":"local.provider.extensions.gardener.cloud/v1alpha1","kind":"Config","x":1}`)}
}

func defaultStatus() extensionsv1alpha1.DefaultStatus {
	return extensionsv1alpha1.DefaultStatus{
		ProviderStatus: raw(`{"kind":"Status","zones":["a","b"]}`),
		Conditions: []extensionsv1alpha1.Condition{{
			Type: extensionsv1alpha1.ShootControlPlaneHealthy, Status: extensionsv1alpha1.ConditionProgressing,
			LastTransitionTime: now, LastUpdateTime: now, Reason: "Rolling", Message: "2 of 3 ready",
			Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraQuotaExceeded},
		}},
		LastError: &extensionsv1alpha1.LastError{
			Description: "quota", TaskID: ptrStr("task-1"), LastUpdateTime: &now,
			Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraQuotaExceeded},
		},
		LastOperation: &extensionsv1alpha1.LastOperation{
			Description: "reconciling", LastUpdateTime: now, Progress: 42,
			State: extensionsv1alpha1.LastOperationStateError, Type: extensionsv1alpha1.LastOperationTypeReconcile,
		},
		ObservedGeneration: 1,
		State:              raw(`{"machines":[{"name":"m1"}]}`),
		Resources: []extensionsv1alpha1.NamedResourceReference{{
			Name:        "state",
			ResourceRef: extensionsv1alpha1.CrossVersionObjectReference{Kind: "Secret", Name: "state", APIVersion: "v1"},
		}},
	}
}

func oscUnits() []extensionsv1alpha1.Unit {
	cmd := extensionsv1alpha1.CommandRestart
	return []extensionsv1alpha1.Unit{{
		Name: "kubelet.service", Command: &cmd, Enable: ptrBool(true), Content: ptrStr("[Unit]\nDescription=kubelet\n"),
		DropIns:   []extensionsv1alpha1.DropIn{{Name: "10-env.conf", Content: "[Service]\nEnvironment=A=b\n"}},
		FilePaths: []string{"/etc/kubelet/config.yaml"},
	}}
}

func oscFiles() []extensionsv1alpha1.File {
	return []extensionsv1alpha1.File{
		{
			Path: "/etc/kubelet/config.yaml", Permissions: ptrInt32(0o600), HostName: ptrStr("node-1"),
			Content: extensionsv1alpha1.FileContent{
				Inline:            &extensionsv1alpha1.FileContentInline{Encoding: extensionsv1alpha1.FileEncodingB64, Data: "a2luZDogS3ViZWxldENvbmZpZ3VyYXRpb24K"},
				TransmitUnencoded: ptrBool(false),
			},
		},
		{Path: "/etc/ca.crt", Content: extensionsv1alpha1.FileContent{SecretRef: &extensionsv1alpha1.FileContentSecretRef{Name: "ca", DataKey: "ca.crt"}}},
		{Path: "/opt/bin/tool", Content: extensionsv1alpha1.FileContent{ImageRef: &extensionsv1alpha1.FileContentImageRef{Image: "registry.local/tool:v1", FilePathInImage: "/tool"}}},
	}
}

// fullWorker sets every field of a Worker.
func fullWorker() *extensionsv1alpha1.Worker {
	swap := extensionsv1alpha1.LimitedSwap
	strategy := extensionsv1alpha1.AutoRollingUpdate
	return &extensionsv1alpha1.Worker{
		Spec: extensionsv1alpha1.WorkerSpec{
			DefaultSpec:                  defaultSpec("local"),
			InfrastructureProviderStatus: raw(`{"kind":"InfrastructureStatus","network":"n1"}`),
			Region:                       "local",
			SecretRef:                    secret,
			SSHPublicKey:                 []byte("ssh-ed25519 AAAA test"),
			Pools: []extensionsv1alpha1.WorkerPool{{
				MachineType: "local", Maximum: 3, Minimum: 1,
				MaxSurge: intstr.FromInt32(1), MaxUnavailable: intstr.FromString("10%"),
				Annotations:  map[string]string{"a": "b"},
				Labels:       map[string]string{"worker.gardener.cloud/pool": "p1"},
				Taints:       []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now}},
				MachineImage: extensionsv1alpha1.MachineImage{Name: "local", Version: "1.0.0"},
				Name:         "p1", NodeAgentSecretName: ptrStr("gardener-node-agent-p1-abc"),
				ProviderConfig:        raw(`{"kind":"WorkerConfig"}`),
				UserDataSecretRef:     corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "userdata"}, Key: "content", Optional: ptrBool(false)},
				Volume:                &extensionsv1alpha1.Volume{Name: ptrStr("root"), Type: ptrStr("ssd"), Size: "20Gi", Encrypted: ptrBool(true)},
				DataVolumes:           []extensionsv1alpha1.DataVolume{{Name: "data", Type: ptrStr("hdd"), Size: "50Gi", Encrypted: ptrBool(false)}},
				KubeletDataVolumeName: ptrStr("data"),
				Zones:                 []string{"z1", "z2"},
				MachineControllerManagerSettings: &extensionsv1alpha1.MachineControllerManagerSettings{
					MachineDrainTimeout: ptrDur(2 * time.Hour), MachineHealthTimeout: ptrDur(10 * time.Minute),
					MachineCreationTimeout: ptrDur(20 * time.Minute), MaxEvictRetries: ptrInt32(30),
					NodeConditions: []string{"KernelDeadlock"}, InPlaceUpdateTimeout: ptrDur(time.Hour),
					DisableHealthTimeout: ptrBool(false), AutoPreserveFailedMachineMax: ptrInt32(1),
					MachinePreserveTimeout: ptrDur(3 * time.Hour),
				},
				KubernetesVersion: ptrStr("1.36.3"),
				KubeletConfig: &extensionsv1alpha1.KubeletConfig{
					FeatureGates:         map[string]bool{"SomeGate": true},
					ContainerLogMaxSize:  ptrQty("100Mi"),
					ContainerLogMaxFiles: ptrInt32(5), CPUCFSQuota: ptrBool(true), CPUManagerPolicy: ptrStr("static"),
					EvictionHard:                     &extensionsv1alpha1.KubeletConfigEviction{MemoryAvailable: ptrStr("100Mi"), ImageFSAvailable: ptrStr("5%"), ImageFSInodesFree: ptrStr("5%"), NodeFSAvailable: ptrStr("5%"), NodeFSInodesFree: ptrStr("5%")},
					EvictionMaxPodGracePeriod:        ptrInt32(90),
					EvictionMinimumReclaim:           &extensionsv1alpha1.KubeletConfigEvictionMinimumReclaim{MemoryAvailable: ptrQty("0"), ImageFSAvailable: ptrQty("1Gi"), ImageFSInodesFree: ptrQty("1k"), NodeFSAvailable: ptrQty("2Gi"), NodeFSInodesFree: ptrQty("2k")},
					EvictionPressureTransitionPeriod: ptrDur(4 * time.Minute),
					EvictionSoft:                     &extensionsv1alpha1.KubeletConfigEviction{MemoryAvailable: ptrStr("200Mi")},
					EvictionSoftGracePeriod:          &extensionsv1alpha1.KubeletConfigEvictionSoftGracePeriod{MemoryAvailable: ptrDur(time.Minute), ImageFSAvailable: ptrDur(time.Minute), ImageFSInodesFree: ptrDur(time.Minute), NodeFSAvailable: ptrDur(time.Minute), NodeFSInodesFree: ptrDur(time.Minute)},
					FailSwapOn:                       ptrBool(false),
					ImageGCHighThresholdPercent:      ptrInt32(50), ImageGCLowThresholdPercent: ptrInt32(40),
					ImageMinimumGCAge: ptrDur(2 * time.Minute), ImageMaximumGCAge: ptrDur(0),
					ImagePullCredentialsVerificationPolicy: ptrStr("NeverVerifyPreloadedImages"),
					KubeReserved:                           &extensionsv1alpha1.KubeletConfigReserved{CPU: ptrQty("80m"), Memory: ptrQty("1Gi"), EphemeralStorage: ptrQty("1Gi"), PID: ptrQty("20k")},
					MaxParallelImagePulls:                  ptrInt32(2), MaxPods: ptrInt32(110),
					MemorySwap:                           &extensionsv1alpha1.MemorySwapConfiguration{SwapBehavior: &swap},
					PodPIDsLimit:                         ptrInt64(4096),
					PreloadedImagesVerificationAllowlist: []string{"registry.local/*"},
					ProtectKernelDefaults:                ptrBool(true), RegistryBurst: ptrInt32(10), RegistryPullQPS: ptrInt32(5),
					SeccompDefault: ptrBool(true), SerializeImagePulls: ptrBool(false), SingleProcessOOMKill: ptrBool(false),
					StreamingConnectionIdleTimeout: ptrDur(5 * time.Minute),
				},
				NodeTemplate: &extensionsv1alpha1.NodeTemplate{
					Capacity:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
					VirtualCapacity: corev1.ResourceList{"example.com/virtual": resource.MustParse("1")},
				},
				Architecture: ptrStr("amd64"),
				ClusterAutoscaler: &extensionsv1alpha1.ClusterAutoscalerOptions{
					ScaleDownUtilizationThreshold: ptrStr("0.5"), ScaleDownGpuUtilizationThreshold: ptrStr("0.4"),
					ScaleDownUnneededTime: ptrDur(30 * time.Minute), ScaleDownUnreadyTime: ptrDur(time.Hour),
					MaxNodeProvisionTime: ptrDur(20 * time.Minute),
				},
				Priority:       ptrInt32(10),
				UpdateStrategy: &strategy,
			}},
		},
		Status: extensionsv1alpha1.WorkerStatus{
			DefaultStatus: defaultStatus(),
			MachineDeployments: []extensionsv1alpha1.MachineDeployment{{
				Name: "shoot--dev--a-p1-z1", Minimum: 1, Maximum: 3, Priority: ptrInt32(10), AutoPreserveFailedMachineMax: ptrInt32(1),
			}},
			MachineDeploymentsLastUpdateTime: &now,
			InPlaceUpdates:                   &extensionsv1alpha1.InPlaceUpdatesWorkerStatus{WorkerPoolToHashMap: map[string]string{"p1": "abc"}},
		},
	}
}

// fullOSC sets every field of an OperatingSystemConfig.
func fullOSC() *extensionsv1alpha1.OperatingSystemConfig {
	cgroup := extensionsv1alpha1.CgroupDriverSystemd
	op := extensionsv1alpha1.AddPluginPathOperation
	return &extensionsv1alpha1.OperatingSystemConfig{
		Spec: extensionsv1alpha1.OperatingSystemConfigSpec{
			CRIConfig: &extensionsv1alpha1.CRIConfig{
				Name: extensionsv1alpha1.CRINameContainerD, CgroupDriver: &cgroup,
				Containerd: &extensionsv1alpha1.ContainerdConfig{
					Registries: []extensionsv1alpha1.RegistryConfig{{
						Upstream: "docker.io", Server: ptrStr("https://registry-1.docker.io"), ReadinessProbe: ptrBool(true),
						Hosts: []extensionsv1alpha1.RegistryHost{{
							URL: "https://mirror.local", Capabilities: []extensionsv1alpha1.RegistryCapability{extensionsv1alpha1.PullCapability, extensionsv1alpha1.ResolveCapability},
							CACerts: []string{"/etc/ca.crt"}, OverridePath: ptrBool(true),
						}},
					}},
					SandboxImage: "registry.k8s.io/pause:3.10",
					Plugins: []extensionsv1alpha1.PluginConfig{{
						Op: &op, Path: []string{"io.containerd.grpc.v1.cri", "containerd"},
						Values: &apiextensionsv1.JSON{Raw: []byte(`{"snapshotter":"overlayfs"}`)},
					}},
				},
			},
			DefaultSpec: defaultSpec("local"),
			Purpose:     extensionsv1alpha1.OperatingSystemConfigPurposeReconcile,
			Units:       oscUnits(),
			Files:       oscFiles(),
			InPlaceUpdates: &extensionsv1alpha1.InPlaceUpdates{
				OperatingSystemVersion: "1.1.0", KubeletVersion: "1.36.3",
				CredentialsRotation: &extensionsv1alpha1.CredentialsRotation{
					CertificateAuthorities: &extensionsv1alpha1.CARotation{LastInitiationTime: &now},
					ServiceAccountKey:      &extensionsv1alpha1.ServiceAccountKeyRotation{LastInitiationTime: &now},
				},
			},
		},
		Status: extensionsv1alpha1.OperatingSystemConfigStatus{
			DefaultStatus:  defaultStatus(),
			ExtensionUnits: oscUnits(),
			ExtensionFiles: oscFiles(),
			CloudConfig:    &extensionsv1alpha1.CloudConfig{SecretRef: corev1.SecretReference{Name: "osc-result", Namespace: "shoot--dev--a"}},
			InPlaceUpdates: &extensionsv1alpha1.InPlaceUpdatesStatus{OSUpdate: &extensionsv1alpha1.OSUpdate{Command: "/opt/bin/update", Args: []string{"--to", "1.1.0"}}},
		},
	}
}

// fixtures returns one fully populated object of every kind, Cluster included.
func fixtures() []client.Object {
	return []client.Object{
		&extensionsv1alpha1.BackupBucket{
			Spec:   extensionsv1alpha1.BackupBucketSpec{DefaultSpec: defaultSpec("local"), Region: "local", SecretRef: secret},
			Status: extensionsv1alpha1.BackupBucketStatus{DefaultStatus: defaultStatus(), GeneratedSecretRef: &corev1.SecretReference{Name: "generated-bucket", Namespace: "garden"}},
		},
		&extensionsv1alpha1.BackupEntry{
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: defaultSpec("local"), BackupBucketProviderStatus: raw(`{"kind":"BucketStatus"}`),
				Region: "local", BucketName: "bucket-1", SecretRef: secret,
			},
			Status: extensionsv1alpha1.BackupEntryStatus{DefaultStatus: defaultStatus()},
		},
		&extensionsv1alpha1.Bastion{
			Spec: extensionsv1alpha1.BastionSpec{
				DefaultSpec: defaultSpec("local"), UserData: []byte("#!/bin/sh\necho hi\n"),
				Ingress: []extensionsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
			},
			Status: extensionsv1alpha1.BastionStatus{DefaultStatus: defaultStatus(), Ingress: &corev1.LoadBalancerIngress{
				IP: "192.0.2.1", Hostname: "bastion.local", IPMode: new(corev1.LoadBalancerIPModeVIP),
				Ports: []corev1.PortStatus{{Port: 22, Protocol: corev1.ProtocolTCP, Error: ptrStr("Pending")}},
			}},
		},
		&extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{
			CloudProfile: *raw(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":"local"}}`),
			Seed:         *raw(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"local"}}`),
			Shoot:        *raw(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"a","namespace":"garden-dev"}}`),
		}},
		&extensionsv1alpha1.ContainerRuntime{
			Spec: extensionsv1alpha1.ContainerRuntimeSpec{
				BinaryPath: extensionsv1alpha1.ContainerDRuntimeContainersBinFolder,
				WorkerPool: extensionsv1alpha1.ContainerRuntimeWorkerPool{Name: "p1", Selector: metav1.LabelSelector{
					MatchLabels:      map[string]string{"worker.gardener.cloud/pool": "p1"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}},
				}},
				DefaultSpec: defaultSpec("gvisor"),
			},
			Status: extensionsv1alpha1.ContainerRuntimeStatus{DefaultStatus: defaultStatus()},
		},
		&extensionsv1alpha1.ControlPlane{
			Spec: extensionsv1alpha1.ControlPlaneSpec{
				DefaultSpec: defaultSpec("local"), InfrastructureProviderStatus: raw(`{"kind":"InfrastructureStatus"}`),
				Region: "local", SecretRef: secret,
			},
			Status: extensionsv1alpha1.ControlPlaneStatus{DefaultStatus: defaultStatus()},
		},
		&extensionsv1alpha1.DNSRecord{
			Spec: extensionsv1alpha1.DNSRecordSpec{
				DefaultSpec: defaultSpec("local"), SecretRef: secret, Region: ptrStr("local"), Zone: ptrStr("local.gardener.cloud"),
				Name: "api.a.dev.local.gardener.cloud", RecordType: extensionsv1alpha1.DNSRecordTypeA,
				Values: []string{"192.0.2.10", "192.0.2.11"}, TTL: ptrInt64(120),
			},
			Status: extensionsv1alpha1.DNSRecordStatus{DefaultStatus: defaultStatus(), Zone: ptrStr("local.gardener.cloud")},
		},
		&extensionsv1alpha1.Extension{
			Spec:   extensionsv1alpha1.ExtensionSpec{DefaultSpec: defaultSpec("shoot-dns-service")},
			Status: extensionsv1alpha1.ExtensionStatus{DefaultStatus: defaultStatus()},
		},
		&extensionsv1alpha1.Infrastructure{
			Spec: extensionsv1alpha1.InfrastructureSpec{DefaultSpec: defaultSpec("local"), Region: "local", SecretRef: secret, SSHPublicKey: []byte("ssh-ed25519 AAAA test")},
			Status: extensionsv1alpha1.InfrastructureStatus{
				DefaultStatus: defaultStatus(), NodesCIDR: ptrStr("10.250.0.0/16"), EgressCIDRs: []string{"192.0.2.0/24"},
				Networking: &extensionsv1alpha1.InfrastructureStatusNetworking{Pods: []string{"10.1.0.0/16"}, Nodes: []string{"10.250.0.0/16"}, Services: []string{"10.2.0.0/16"}},
			},
		},
		&extensionsv1alpha1.Network{
			Spec: extensionsv1alpha1.NetworkSpec{
				DefaultSpec: defaultSpec("calico"), PodCIDR: "10.1.0.0/16", ServiceCIDR: "10.2.0.0/16",
				IPFamilies: []extensionsv1alpha1.IPFamily{extensionsv1alpha1.IPFamilyIPv4},
			},
			Status: extensionsv1alpha1.NetworkStatus{DefaultStatus: defaultStatus(), IPFamilies: []extensionsv1alpha1.IPFamily{extensionsv1alpha1.IPFamilyIPv4, extensionsv1alpha1.IPFamilyIPv6}},
		},
		fullOSC(),
		fullWorker(),
	}
}
