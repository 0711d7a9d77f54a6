package scheduler

import (
	"fmt"
	"log/slog"
	"strings"

	"sigs.k8s.io/yaml"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// The region distance ConfigMaps of MinimalDistance, as Gardener marks them: in namespace garden, labelled
// scheduling.gardener.cloud/purpose=region-config, and annotated with the cloud profiles they serve (comma-separated
// names). Each data key is a shoot region; its value is YAML mapping seed regions to distances.
const (
	GardenNamespace                   = "garden"
	LabelSchedulingPurpose            = "scheduling.gardener.cloud/purpose"
	SchedulingPurposeRegionConfig     = "region-config"
	AnnotationSchedulingCloudProfiles = "scheduling.gardener.cloud/cloudprofiles"
)

// ParseRegionDistances decodes one data value of a region ConfigMap: a YAML (or JSON) mapping of seed regions to
// integer distances, as Gardener reads it. The value comes from users: anything else is an error.
func ParseRegionDistances(data string) (map[string]int, error) {
	out := map[string]int{}
	if err := yaml.Unmarshal([]byte(data), &out); err != nil {
		return nil, fmt.Errorf("decode region distances: %w", err)
	}
	if out == nil { // "null"
		out = map[string]int{}
	}
	return out, nil
}

// pickRegionConfig returns the first ConfigMap (in list order) whose cloud profiles annotation names the cloud
// profile, as Gardener does; later ones naming it too are logged and ignored. nil when none does.
func pickRegionConfig(cms []*kcorev1.ConfigMap, cloudProfile string, log *slog.Logger) *kcorev1.ConfigMap {
	var picked *kcorev1.ConfigMap
	for _, cm := range cms {
		for name := range strings.SplitSeq(cm.GetMetadata().GetAnnotations()[AnnotationSchedulingCloudProfiles], ",") {
			if name != cloudProfile {
				continue
			}
			if picked == nil {
				picked = cm
			} else {
				log.Info("Duplicate scheduler region config found", "configMap", cm.GetMetadata().GetNamespace()+"/"+cm.GetMetadata().GetName(),
					"cloudProfileName", cloudProfile, "chosenConfigMap", picked.GetMetadata().GetNamespace()+"/"+picked.GetMetadata().GetName())
			}
			break
		}
	}
	if picked == nil {
		log.Info("No region config found", "cloudProfileName", cloudProfile)
	}
	return picked
}
