package admission

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resources admission reads.
var (
	projects                = schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"}
	cloudProfiles           = schema.GroupResource{Group: "core.gardener.cloud", Resource: "cloudprofiles"}
	namespacedCloudProfiles = schema.GroupResource{Group: "core.gardener.cloud", Resource: "namespacedcloudprofiles"}
	secretBindings          = schema.GroupResource{Group: "core.gardener.cloud", Resource: "secretbindings"}
	credentialsBindings     = schema.GroupResource{Group: "security.gardener.cloud", Resource: "credentialsbindings"}
	controllerRegistrations = schema.GroupResource{Group: "core.gardener.cloud", Resource: "controllerregistrations"}
	backupBuckets           = schema.GroupResource{Group: "core.gardener.cloud", Resource: "backupbuckets"}
	backupEntries           = schema.GroupResource{Group: "core.gardener.cloud", Resource: "backupentries"}
	shoots                  = schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}
	quotas                  = schema.GroupResource{Group: "core.gardener.cloud", Resource: "quotas"}
)

// Gardener's deletion confirmation: Projects and Shoots are deleted only when annotated with it.
const (
	AnnotationConfirmDeletion = "confirmation.gardener.cloud/deletion"
)
