package gardenlet

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/agent/hubobject"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

// Gardener's names on a Gardenlet.
const (
	// ConditionReconciled is the condition that reports the outcome (Gardener's GardenletReconciled).
	ConditionReconciled = "GardenletReconciled"
	// AnnotationOperation is Gardener's operation annotation.
	AnnotationOperation = "gardener.cloud/operation"
	// OperationReconcile asks for an upgrade with the current spec even when it failed before.
	OperationReconcile = "reconcile"
	// OperationForceRedeploy asks for a new pod even when nothing changed.
	OperationForceRedeploy = "force-redeploy"
	// AnnotationRedeployedAt is the pod annotation a force-redeploy sets (to the time), which rolls the pod.
	AnnotationRedeployedAt = "gardenlet.trellis.dev/redeployed-at"
)

// Reasons of the GardenletReconciled condition (Gardener's event reasons).
const (
	ReasonReconciling    = "Reconciling"
	ReasonReconciled     = "Reconciled"
	ReasonReconcileError = "ReconcileError"
)

// Action is what a sync does with the agent's release.
type Action int

const (
	// Keep: the release has the desired values; its rollout's health decides the status.
	Keep Action = iota
	// Upgrade the release to Decision.Values.
	Upgrade
	// Hold: the desired values differ, but an upgrade to this generation already failed and was rolled back; nothing
	// is tried until the spec changes or an operation annotation asks again.
	Hold
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "keep"
	case Upgrade:
		return "upgrade"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is what a sync of the Gardenlet does.
type Decision struct {
	Action Action
	// Values are the release's values wanted (for Upgrade: what to apply).
	Values map[string]any
	// RemoveOperation: the Gardenlet carries an operation annotation the sync answers, to remove once handled.
	RemoveOperation bool
}

// Decide says what to do for gardenlet g when the agent's release is deployed with values deployed (the user-supplied
// values of the deployed revision), at now. An error is a spec the chart cannot take, naming the field.
func Decide(g *seedmanagementv1alpha1.Gardenlet, deployed map[string]any, now time.Time) (Decision, error) {
	op := g.GetMetadata().GetAnnotations()[AnnotationOperation]
	d := Decision{RemoveOperation: op == OperationReconcile || op == OperationForceRedeploy}
	want, err := DesiredValues(g.GetSpec(), deployed)
	if err != nil {
		return d, err
	}
	if op == OperationForceRedeploy {
		ann, _ := want["podAnnotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann[AnnotationRedeployedAt] = now.UTC().Format(time.RFC3339)
		want["podAnnotations"] = ann
	}
	d.Values = want
	same, err := sameValues(want, deployed)
	if err != nil {
		return d, err
	}
	switch {
	case same:
		d.Action = Keep
	case op == "" && FailedAt(g.GetStatus()) == g.GetMetadata().GetGeneration():
		d.Action = Hold
	default:
		d.Action = Upgrade
	}
	return d, nil
}

// FailedAt returns the generation whose upgrade failed (GardenletReconciled False with ReasonReconcileError and the
// status's observedGeneration), or -1.
func FailedAt(st *seedmanagementv1alpha1.GardenletStatus) int64 {
	for _, c := range st.GetConditions() {
		if c.GetType() == ConditionReconciled && c.GetStatus() == "False" && c.GetReason() == ReasonReconcileError &&
			st.ObservedGeneration != nil {
			return st.GetObservedGeneration()
		}
	}
	return -1
}

// DesiredValues returns the chart values for spec: a copy of deployed with what spec sets replaced. Of
// spec.deployment, the fields the trellis-agent chart has are taken (image, resources, podLabels, podAnnotations,
// tolerations, serviceAccountName, imageVectorOverwrite); env, additionalVolumes, additionalVolumeMounts and
// componentImageVectorOverwrite are refused by name; replicaCount and revisionHistoryLimit (which Gardener's API
// defaults to 2), enableHealthProbes and helm.ociRepository (required by Gardener's API) are not taken: the agent runs
// as one replica with probes, and upgrades with the chart its image carries. Of spec.config (a
// GardenletConfiguration, or the agent's AgentConfiguration), the keys the agent's configuration shares with it
// (ConfigKeys) replace those of values.config; the others (gardenClientConnection, resources, featureGates, ...) are
// gardenlet's alone and left out.
func DesiredValues(spec *seedmanagementv1alpha1.GardenletSpec, deployed map[string]any) (map[string]any, error) {
	out, err := copyValues(deployed)
	if err != nil {
		return nil, err
	}
	dep := spec.GetDeployment()
	var unsupported []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"spec.deployment.additionalVolumes", len(dep.GetAdditionalVolumes()) > 0},
		{"spec.deployment.additionalVolumeMounts", len(dep.GetAdditionalVolumeMounts()) > 0},
		{"spec.deployment.env", len(dep.GetEnv()) > 0},
		{"spec.deployment.componentImageVectorOverwrite", dep.GetComponentImageVectorOverwrite() != ""},
	} {
		if f.set {
			unsupported = append(unsupported, f.name)
		}
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("%s: not supported by the trellis-agent chart (docs/install.md)", strings.Join(unsupported, ", "))
	}
	if img := dep.GetImage(); img != nil {
		image, _ := out["image"].(map[string]any)
		if image == nil {
			image = map[string]any{}
		}
		if img.Ref != nil {
			repo, tag, err := splitRef(img.GetRef())
			if err != nil {
				return nil, err
			}
			image["repository"], image["tag"] = repo, tag
		}
		if img.Repository != nil {
			image["repository"] = img.GetRepository()
		}
		if img.Tag != nil {
			image["tag"] = img.GetTag()
		}
		if img.PullPolicy != nil {
			switch p := img.GetPullPolicy(); p {
			case "Always", "Never", "IfNotPresent":
				image["pullPolicy"] = p
			default:
				return nil, fmt.Errorf("spec.deployment.image.pullPolicy: %q: want Always, Never or IfNotPresent", p)
			}
		}
		out["image"] = image
	}
	if r := dep.GetResources(); r != nil {
		if out["resources"], err = jsonValue(hubobject.JSON(r)); err != nil {
			return nil, err
		}
	}
	if l := dep.GetPodLabels(); l != nil {
		out["podLabels"] = stringMap(l)
	}
	if a := dep.GetPodAnnotations(); a != nil {
		out["podAnnotations"] = stringMap(a)
	}
	if ts := dep.GetTolerations(); len(ts) > 0 {
		list := make([]any, 0, len(ts))
		for _, t := range ts {
			v, err := jsonValue(hubobject.JSON(t))
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		out["tolerations"] = list
	}
	if n := dep.GetServiceAccountName(); n != "" {
		sa, _ := out["serviceAccount"].(map[string]any)
		if sa == nil {
			sa = map[string]any{}
		}
		sa["name"] = n
		out["serviceAccount"] = sa
	}
	if v := dep.GetImageVectorOverwrite(); v != "" {
		out["imageVector"] = v
	}
	if raw := spec.GetConfig().GetRaw(); len(raw) > 0 {
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil || cfg == nil {
			return nil, fmt.Errorf("spec.config: want a JSON object (the agent's AgentConfiguration): %v", errOrNull(err))
		}
		values, _ := out["config"].(map[string]any)
		if values == nil {
			values = map[string]any{}
		}
		for _, k := range ConfigKeys {
			if v, ok := cfg[k]; ok {
				values[k] = v
			}
		}
		out["config"] = values
	}
	return out, nil
}

// ConfigKeys are the keys of spec.config that DesiredValues takes into the chart's config value: the fields of the
// agent's AgentConfiguration that are not the chart's own (hubClientConnection, server).
var ConfigKeys = []string{"seedConfig", "seedClientConnection", "heartbeatIntervalSeconds", "reconnectBackoff",
	"controllers", "tracing", "logLevel", "logFormat"}

func errOrNull(err error) error {
	if err == nil {
		return errors.New("null")
	}
	return err
}

// splitRef splits an image reference repository:tag; a digest is refused (the chart names images by tag).
func splitRef(ref string) (repo, tag string, err error) {
	if strings.Contains(ref, "@") {
		return "", "", fmt.Errorf("spec.deployment.image.ref: %q: digests are not supported by the trellis-agent chart, use a tag", ref)
	}
	i := strings.LastIndex(ref, ":")
	if i <= strings.LastIndex(ref, "/") || i == len(ref)-1 || i == 0 {
		return "", "", fmt.Errorf("spec.deployment.image.ref: %q: want repository:tag", ref)
	}
	return ref[:i], ref[i+1:], nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func jsonValue(raw []byte) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// copyValues deep-copies values in JSON normal form (numbers as float64), so that comparisons do not depend on
// how the values were built.
func copyValues(values map[string]any) (map[string]any, error) {
	b, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("release values: %w", err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("release values: %w", err)
	}
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

func sameValues(a, b map[string]any) (bool, error) {
	na, err := copyValues(a)
	if err != nil {
		return false, err
	}
	nb, err := copyValues(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(na, nb), nil
}
