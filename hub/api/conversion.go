package api

import (
	"encoding/json"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// converter maps a served version to the stored one and back.
type converter struct {
	newStored  func() store.Object
	toStored   func(store.Object) (store.Object, error)
	fromStored func(store.Object) (store.Object, error)
}

// converters by served kind id.
var converters = map[string]converter{
	"core.gardener.cloud/v1beta1/ControllerDeployment": {
		newStored: func() store.Object { return &corev1.ControllerDeployment{} },
		toStored: func(o store.Object) (store.Object, error) {
			return controllerDeploymentToV1(o.(*corev1beta1.ControllerDeployment))
		},
		fromStored: func(o store.Object) (store.Object, error) {
			return controllerDeploymentToV1beta1(o.(*corev1.ControllerDeployment))
		},
	},
}

// Annotations that keep a v1beta1 ControllerDeployment of a non-helm type in the v1 shape, as Gardener does.
const (
	annotationDeploymentType           = "migration.controllerdeployment.gardener.cloud/type"
	annotationDeploymentProviderConfig = "migration.controllerdeployment.gardener.cloud/provider-config"
)

// helmProviderConfig is the providerConfig of a v1beta1 ControllerDeployment of type helm.
type helmProviderConfig struct {
	Chart         []byte          `json:"chart,omitempty"`
	Values        json.RawMessage `json:"values,omitempty"`
	OCIRepository *struct {
		Ref        *string `json:"ref,omitempty"`
		Repository *string `json:"repository,omitempty"`
		Tag        *string `json:"tag,omitempty"`
		Digest     *string `json:"digest,omitempty"`
	} `json:"ociRepository,omitempty"`
}

func controllerDeploymentToV1(in *corev1beta1.ControllerDeployment) (*corev1.ControllerDeployment, error) {
	out := &corev1.ControllerDeployment{
		ApiVersion:             "core.gardener.cloud/v1",
		Kind:                   "ControllerDeployment",
		Metadata:               proto.Clone(in.GetMetadata()).(*metav1.ObjectMeta),
		InjectGardenKubeconfig: in.InjectGardenKubeconfig,
	}
	if out.Metadata == nil {
		out.Metadata = &metav1.ObjectMeta{}
	}
	if in.GetType() != "helm" {
		if out.Metadata.Annotations == nil {
			out.Metadata.Annotations = map[string]string{}
		}
		out.Metadata.Annotations[annotationDeploymentType] = in.GetType()
		if raw := in.GetProviderConfig().GetRaw(); len(raw) > 0 {
			out.Metadata.Annotations[annotationDeploymentProviderConfig] = string(raw)
		}
		return out, nil
	}
	var pc helmProviderConfig
	if raw := in.GetProviderConfig().GetRaw(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &pc); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("providerConfig: not a helm deployment: %v", err))
		}
	}
	h := &corev1.HelmControllerDeployment{RawChart: pc.Chart}
	if len(pc.Values) > 0 && string(pc.Values) != "null" {
		h.Values = &metav1.RawExtension{Raw: pc.Values}
	}
	if o := pc.OCIRepository; o != nil {
		h.OciRepository = &corev1.OCIRepository{Ref: o.Ref, Repository: o.Repository, Tag: o.Tag, Digest: o.Digest}
	}
	out.Helm = h
	return out, nil
}

func controllerDeploymentToV1beta1(in *corev1.ControllerDeployment) (*corev1beta1.ControllerDeployment, error) {
	md := proto.Clone(in.GetMetadata()).(*metav1.ObjectMeta)
	out := &corev1beta1.ControllerDeployment{
		ApiVersion:             "core.gardener.cloud/v1beta1",
		Kind:                   "ControllerDeployment",
		Metadata:               md,
		InjectGardenKubeconfig: in.InjectGardenKubeconfig,
	}
	if t, ok := md.GetAnnotations()[annotationDeploymentType]; ok {
		out.Type = t
		if pc, ok := md.GetAnnotations()[annotationDeploymentProviderConfig]; ok {
			out.ProviderConfig = &metav1.RawExtension{Raw: []byte(pc)}
		}
		md.Annotations = maps.Clone(md.Annotations)
		delete(md.Annotations, annotationDeploymentType)
		delete(md.Annotations, annotationDeploymentProviderConfig)
		if len(md.Annotations) == 0 {
			md.Annotations = nil
		}
		return out, nil
	}
	out.Type = "helm"
	h := in.GetHelm()
	pc := helmProviderConfig{Chart: h.GetRawChart()}
	if v := h.GetValues().GetRaw(); len(v) > 0 {
		pc.Values = v
	}
	if o := h.GetOciRepository(); o != nil {
		pc.OCIRepository = &struct {
			Ref        *string `json:"ref,omitempty"`
			Repository *string `json:"repository,omitempty"`
			Tag        *string `json:"tag,omitempty"`
			Digest     *string `json:"digest,omitempty"`
		}{o.Ref, o.Repository, o.Tag, o.Digest}
	}
	raw, err := json.Marshal(pc)
	if err != nil {
		return nil, err
	}
	out.ProviderConfig = &metav1.RawExtension{Raw: raw}
	return out, nil
}
