package admission

import corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"

// Builtin returns the hub's admission plugins: this table is the whole list, one row per kind with a plugin (the
// functions live in the kind's file). Kinds without a row get only the generic metadata validation of package api.
func Builtin() Plugins {
	return newPlugins(
		kind(nil, validateAccessToken, nil).withPrepareCreate(issueAccessToken).withPrepareUpdate(keepAccessTokenStatus).withConceal(concealAccessToken),
		kind(nil, validateBackupBucket, nil).withAdmit(admitBackupBucketExtensions),
		kind(nil, validateBackupEntry, nil).withAdmit(admitBackupEntryExtensions),
		kind(nil, validateBastion, nil).withPrepareCreate(prepareBastion),
		kind(nil, validateCertificateSigningRequest, nil).withPrepareCreate(prepareCertificateSigningRequest),
		kind(defaultCloudProfile, validateCloudProfile, nil),
		kind(nil, validateClusterRole, nil),
		kind(nil, validateControllerDeployment, nil),
		kind(nil, validateControllerDeploymentV1beta1, nil),
		kind(nil, validateControllerInstallation, nil),
		kind(defaultControllerRegistration, validateControllerRegistration, nil),
		kind(defaultCredentialsBinding, validateCredentialsBinding, nil),
		kind(nil, validateExposureClass, nil),
		kind(defaultGardenlet, validateGardenlet, nil),
		kind(nil, validateLease, nil),
		kind(defaultManagedSeed, validateManagedSeed, nil),
		kind(defaultManagedSeedSet, validateManagedSeedSet, nil),
		kind(defaultNamespace, validateNamespace, nil),
		kind(defaultNamespacedCloudProfile, validateNamespacedCloudProfile, nil),
		kind(defaultProject, validateProject, confirmDeletion[*corev1beta1.Project]).withPrepareCreate(prepareProject),
		kind(nil, validateQuota, nil),
		kind(defaultSecret, validateSecret, nil),
		kind(nil, validateConfigMap, nil),
		kind(defaultSecretBinding, validateSecretBinding, nil),
		kind(defaultSeed, validateSeed, validateSeedDelete).withAdmit(admitSeedExtensions),
		kind(defaultShoot, validateShoot, validateShootDelete).withMustIncreaseGeneration(shootMustIncreaseGeneration).withAdmit(admitShootWrite).
			withWarnings(warnShoot),
		kind(nil, validateWorkloadIdentity, nil),
	)
}
