package v1alpha1

// ObjectKinds returns a new, empty object of every extension kind (all kinds but Cluster), in a fixed order. Generic
// code uses it to set up one controller, watch or test per kind.
func ObjectKinds() []Object {
	return []Object{
		&BackupBucket{},
		&BackupEntry{},
		&Bastion{},
		&ContainerRuntime{},
		&ControlPlane{},
		&DNSRecord{},
		&Extension{},
		&Infrastructure{},
		&Network{},
		&OperatingSystemConfig{},
		&Worker{},
	}
}

// GetCondition returns the condition of the given type, or nil if there is none. The pointer points into conditions,
// so writes through it change the slice's element.
func GetCondition(conditions []Condition, conditionType string) *Condition {
	for i := range conditions {
		if conditions[i].Type == conditionType {
			return &conditions[i]
		}
	}
	return nil
}
