package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// addKnownTypes registers every kind of the group and its list with the scheme.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&BackupBucket{}, &BackupBucketList{},
		&BackupEntry{}, &BackupEntryList{},
		&Bastion{}, &BastionList{},
		&Cluster{}, &ClusterList{},
		&ContainerRuntime{}, &ContainerRuntimeList{},
		&ControlPlane{}, &ControlPlaneList{},
		&DNSRecord{}, &DNSRecordList{},
		&Extension{}, &ExtensionList{},
		&Infrastructure{}, &InfrastructureList{},
		&Network{}, &NetworkList{},
		&OperatingSystemConfig{}, &OperatingSystemConfigList{},
		&Worker{}, &WorkerList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
