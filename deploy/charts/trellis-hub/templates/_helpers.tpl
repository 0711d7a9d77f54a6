{{- define "trellis-hub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
trellis-hub.fullname: fullnameOverride, else the release name when it contains the chart name, else
<release>-<chart>; a DNS label.
*/}}
{{- define "trellis-hub.fullname" -}}
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

{{- define "trellis-hub.serviceAccountName" -}}
{{- default (include "trellis-hub.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "trellis-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trellis-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "trellis-hub.labels" -}}
{{ include "trellis-hub.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: hub
app.kubernetes.io/part-of: trellis
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
trellis-hub.external is "true" with an external etcd.
*/}}
{{- define "trellis-hub.external" -}}
{{- if .Values.etcd.external.endpoints -}}true{{- end -}}
{{- end -}}

{{- define "trellis-hub.adminTokenSecret" -}}
{{- default (printf "%s-admin-token" (include "trellis-hub.fullname" .)) .Values.adminToken.existingSecret -}}
{{- end -}}

{{- define "trellis-hub.encryptionSecret" -}}
{{- default (printf "%s-encryption" (include "trellis-hub.fullname" .)) .Values.encryption.existingSecret -}}
{{- end -}}

{{/*
trellis-hub.validate fails the rendering on combinations the hub cannot run.
*/}}
{{- define "trellis-hub.validate" -}}
{{- if and (not (include "trellis-hub.external" .)) (gt (int .Values.replicaCount) 1) -}}
{{- fail "replicaCount > 1 needs an external etcd (etcd.external.endpoints): the embedded etcd is one replica's" -}}
{{- end -}}
{{- end -}}

{{/*
trellis-hub.pod is the pod template of the StatefulSet (embedded etcd) or the Deployment (external etcd).
*/}}
{{- define "trellis-hub.pod" -}}
{{- $fullname := include "trellis-hub.fullname" . -}}
metadata:
  labels:
    {{- include "trellis-hub.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/components: {{ .Values.components | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "trellis-hub.serviceAccountName" . }}
  automountServiceAccountToken: false
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- range . }}
    - name: {{ . }}
    {{- end }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: 60
  containers:
  - name: trellis-hub
    image: "{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}"
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
    - --listen=0.0.0.0:{{ .Values.service.ports.main }}
    - --grpc-listen=0.0.0.0:{{ .Values.service.ports.agent }}
    {{- if .Values.tunnel.enabled }}
    - --tunnel-listen=0.0.0.0:{{ .Values.service.ports.tunnel }}
    - --tunnel-peer-address=$(POD_IP):{{ .Values.service.ports.tunnel }}
    {{- with .Values.tunnel.domain }}
    - --tunnel-domain={{ . }}
    {{- end }}
    {{- else }}
    - --tunnel-listen=
    {{- end }}
    - --data-dir=/var/lib/trellis-hub
    - --admin-token-file=/etc/trellis-hub/admin-token/token
    - --encryption-key-file=/etc/trellis-hub/encryption/encryption-keys
    - --host=$(POD_IP)
    - --host={{ $fullname }}
    - --host={{ $fullname }}.{{ .Release.Namespace }}
    - --host={{ $fullname }}.{{ .Release.Namespace }}.svc
    - --host={{ $fullname }}.{{ .Release.Namespace }}.svc.cluster.local
    {{- range .Values.hosts }}
    - --host={{ . }}
    {{- end }}
    {{- if .Values.tls.existingSecret }}
    - --tls-cert-file=/etc/trellis-hub/tls/tls.crt
    - --tls-key-file=/etc/trellis-hub/tls/tls.key
    {{- end }}
    {{- if include "trellis-hub.external" . }}
    - --etcd-endpoints={{ join "," .Values.etcd.external.endpoints }}
    {{- if .Values.etcd.external.tls.secretName }}
    - --etcd-ca=/etc/trellis-hub/etcd/ca.crt
    - --etcd-cert=/etc/trellis-hub/etcd/tls.crt
    - --etcd-key=/etc/trellis-hub/etcd/tls.key
    {{- end }}
    {{- end }}
    {{- if .Values.components }}
    - --config=/etc/trellis-hub/config/components.yaml
    {{- end }}
    - --log-level={{ .Values.logLevel }}
    - --log-format={{ .Values.logFormat }}
    {{- range .Values.extraArgs }}
    - {{ . }}
    {{- end }}
    env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    ports:
    - name: main
      containerPort: {{ .Values.service.ports.main }}
      protocol: TCP
    - name: agent
      containerPort: {{ .Values.service.ports.agent }}
      protocol: TCP
    {{- if .Values.tunnel.enabled }}
    - name: tunnel
      containerPort: {{ .Values.service.ports.tunnel }}
      protocol: TCP
    {{- end }}
    livenessProbe:
      httpGet:
        path: /livez
        port: main
        scheme: HTTPS
      {{- toYaml .Values.probes.liveness | nindent 6 }}
    readinessProbe:
      httpGet:
        path: /readyz
        port: main
        scheme: HTTPS
      {{- toYaml .Values.probes.readiness | nindent 6 }}
    resources:
      {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
    - name: data
      mountPath: /var/lib/trellis-hub
    - name: admin-token
      mountPath: /etc/trellis-hub/admin-token
      readOnly: true
    - name: encryption
      mountPath: /etc/trellis-hub/encryption
      readOnly: true
    {{- if .Values.tls.existingSecret }}
    - name: tls
      mountPath: /etc/trellis-hub/tls
      readOnly: true
    {{- end }}
    {{- if and (include "trellis-hub.external" .) .Values.etcd.external.tls.secretName }}
    - name: etcd-tls
      mountPath: /etc/trellis-hub/etcd
      readOnly: true
    {{- end }}
    {{- if .Values.components }}
    - name: config
      mountPath: /etc/trellis-hub/config
      readOnly: true
    {{- end }}
    - name: tmp
      mountPath: /tmp
  volumes:
  {{- if include "trellis-hub.external" . }}
  # With an external etcd the data directory holds only the CA bundle the hub publishes and a copy of the token.
  - name: data
    emptyDir:
      sizeLimit: 64Mi
  {{- end }}
  - name: admin-token
    secret:
      secretName: {{ include "trellis-hub.adminTokenSecret" . }}
      items:
      - key: {{ .Values.adminToken.existingSecretKey }}
        path: token
  - name: encryption
    secret:
      secretName: {{ include "trellis-hub.encryptionSecret" . }}
      items:
      - key: {{ .Values.encryption.existingSecretKey }}
        path: encryption-keys
  {{- if .Values.tls.existingSecret }}
  - name: tls
    secret:
      secretName: {{ .Values.tls.existingSecret }}
  {{- end }}
  {{- if and (include "trellis-hub.external" .) .Values.etcd.external.tls.secretName }}
  - name: etcd-tls
    secret:
      secretName: {{ .Values.etcd.external.tls.secretName }}
      items:
      - {key: {{ .Values.etcd.external.tls.caKey }}, path: ca.crt}
      - {key: {{ .Values.etcd.external.tls.certKey }}, path: tls.crt}
      - {key: {{ .Values.etcd.external.tls.keyKey }}, path: tls.key}
  {{- end }}
  {{- if .Values.components }}
  - name: config
    configMap:
      name: {{ $fullname }}-components
  {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.affinity }}
  affinity:
    {{- toYaml .Values.affinity | nindent 4 }}
  {{- else if gt (int .Values.replicaCount) 1 }}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "trellis-hub.selectorLabels" . | nindent 14 }}
  {{- end }}
{{- end -}}
