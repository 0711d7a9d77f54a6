{{/*
trellis-agent.name is the chart name, or nameOverride.
*/}}
{{- define "trellis-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
trellis-agent.fullname names the objects: fullnameOverride, else the release name when it contains the chart name,
else <release>-<chart>; a DNS label.
*/}}
{{- define "trellis-agent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
trellis-agent.clusterRoleName names the cluster-scoped RBAC objects after Gardener's gardenlet role, with the release
namespace, so that two releases in one cluster do not share them.
*/}}
{{- define "trellis-agent.clusterRoleName" -}}
{{- printf "trellis.dev:system:%s:%s" (include "trellis-agent.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "trellis-agent.serviceAccountName" -}}
{{- default (include "trellis-agent.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
trellis-agent.selectorLabels select the agent's pods; they never change between releases.
*/}}
{{- define "trellis-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trellis-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "trellis-agent.labels" -}}
{{ include "trellis-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: trellis
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
trellis-agent.bootstrapSecret is the Secret holding the bootstrap token, "" without one.
*/}}
{{- define "trellis-agent.bootstrapSecret" -}}
{{- if .Values.bootstrap.existingSecret -}}
{{- .Values.bootstrap.existingSecret -}}
{{- else if .Values.bootstrap.token -}}
{{- printf "%s-bootstrap-token" (include "trellis-agent.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
trellis-agent.config is the agent's AgentConfiguration: .Values.config with the fields the chart owns set over it.
*/}}
{{- define "trellis-agent.config" -}}
{{- $hub := dict "address" (required "hub.address is required: the hub's agent listener, host:port" .Values.hub.address) -}}
{{- $_ := set $hub "kubeconfigSecret" (dict "namespace" (default .Release.Namespace .Values.kubeconfigSecret.namespace) "name" .Values.kubeconfigSecret.name) -}}
{{- if .Values.hub.caSecret.name -}}
{{- $_ := set $hub "caFile" "/etc/trellis-agent/hub-ca/ca.crt" -}}
{{- else if .Values.hub.caBundle -}}
{{- $_ := set $hub "caBundle" .Values.hub.caBundle -}}
{{- end -}}
{{- if include "trellis-agent.bootstrapSecret" . -}}
{{- $_ := set $hub "bootstrapTokenFile" "/etc/trellis-agent/bootstrap/token" -}}
{{- end -}}
{{- $fixed := dict "apiVersion" "agent.trellis.dev/v1alpha1" "kind" "AgentConfiguration" "hubClientConnection" $hub "seedClientConnection" (dict "kubeconfig" "") -}}
{{- $cfg := mustMergeOverwrite (deepCopy .Values.config) $fixed -}}
{{- if .Values.imageVector -}}
{{- $cfg = mustMergeOverwrite $cfg (dict "controllers" (dict "shoot" (dict "controlPlane" (dict "imageVector" "/etc/trellis-agent/config/image-vector.yaml")))) -}}
{{- end -}}
{{- $seed := required "config.seedConfig.metadata.name is required: the seed's name" (dig "seedConfig" "metadata" "name" "" $cfg) -}}
{{- toYaml $cfg -}}
{{- end -}}
