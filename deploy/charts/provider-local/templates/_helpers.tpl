{{/*
provider-local.name is the chart name, or nameOverride.
*/}}
{{- define "provider-local.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
provider-local.fullname names the namespaced objects: fullnameOverride, else the release name when it already
contains the chart name (the agent names releases after the ControllerRegistration, "provider-local"), else
<release>-<chart>. Truncated to 63 characters, a DNS label.
*/}}
{{- define "provider-local.fullname" -}}
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
provider-local.clusterRoleName names the cluster-scoped RBAC objects in Gardener's convention for global resources of
extensions (extensions.gardener.cloud:<extension>:<resource>), with the release namespace as the resource: the
namespace (extension-<ControllerInstallation>) is unique per installation, so two installations in one cluster (two
seeds sharing a kube-apiserver in tests) do not fight over one ClusterRole.
*/}}
{{- define "provider-local.clusterRoleName" -}}
{{- printf "extensions.gardener.cloud:%s:%s" (include "provider-local.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/*
provider-local.chart is the chart label value: <name>-<version>.
*/}}
{{- define "provider-local.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
provider-local.selectorLabels select the pods of the Deployment; they must never change for a release, as a
Deployment's selector is immutable.
*/}}
{{- define "provider-local.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provider-local.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
provider-local.labels are the recommended labels of every object.
*/}}
{{- define "provider-local.labels" -}}
helm.sh/chart: {{ include "provider-local.chart" . }}
{{ include "provider-local.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
provider-local.serviceAccountName is serviceAccount.name, else the full name.
*/}}
{{- define "provider-local.serviceAccountName" -}}
{{- default (include "provider-local.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
provider-local.image is <repository>:<tag>, the tag defaulting to the chart's appVersion.
*/}}
{{- define "provider-local.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

