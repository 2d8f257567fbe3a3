{{/* The chart name, or nameOverride. */}}
{{- define "dtq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: fullnameOverride, else the release name when it
contains the chart name, else <release>-<chart>. Release "dtq" gives the names
of dist/install.yaml (dtq-controller-manager, dtq-manager-role ...). It is cut
at 28 characters so that the longest name, <fullname>-controller-manager-metrics-service,
is a valid Service name (63).
*/}}
{{- define "dtq.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 28 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 28 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 28 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "dtq.labels" -}}
app.kubernetes.io/name: {{ include "dtq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "dtq.commonLabels" . }}
{{- end }}

{{/* The labels of every object besides name and instance (pods add their selector labels). */}}
{{- define "dtq.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of the manager's pods (control-plane as in config/manager). */}}
{{- define "dtq.manager.selectorLabels" -}}
control-plane: controller-manager
app.kubernetes.io/name: {{ include "dtq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector labels of the API's pods. */}}
{{- define "dtq.api.selectorLabels" -}}
app.kubernetes.io/component: api
app.kubernetes.io/name: {{ include "dtq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dtq.manager.serviceAccountName" -}}
{{ include "dtq.fullname" . }}-controller-manager
{{- end }}

{{- define "dtq.api.serviceAccountName" -}}
{{ include "dtq.fullname" . }}-api
{{- end }}

{{/*
An image reference from {repository, tag, digest} and the chart: repository@digest
when a digest is set, else repository:tag with the tag defaulting to appVersion.
Call with (dict "image" .Values.x.image "chart" .Chart).
*/}}
{{- define "dtq.image" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret and key holding the Redis URL. */}}
{{- define "dtq.redis.urlSecret" -}}
{{- if .Values.redis.url }}
{{- include "dtq.fullname" . }}-redis
{{- else }}
{{- required "set redis.url or redis.existingSecret (a Secret holding the Redis URL)" .Values.redis.existingSecret }}
{{- end }}
{{- end }}

{{- define "dtq.redis.urlKey" -}}
{{- if .Values.redis.url }}url{{ else }}{{ required "redis.existingSecretKey must be set" .Values.redis.existingSecretKey }}{{ end }}
{{- end }}

{{/* The DTQ_REDIS_* variables of a container (manager, API). */}}
{{- define "dtq.redis.env" -}}
{{- if and .Values.redis.tls.caSecret.name .Values.redis.url (not (hasPrefix "rediss" .Values.redis.url)) }}
{{- fail "redis.tls.caSecret needs a TLS redis.url (rediss://, rediss+cluster:// or rediss+sentinel://)" }}
{{- end }}
- name: DTQ_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "dtq.redis.urlSecret" . }}
      key: {{ include "dtq.redis.urlKey" . }}
{{- if .Values.redis.username }}
- name: DTQ_REDIS_USERNAME
  value: {{ .Values.redis.username | quote }}
{{- else }}
- name: DTQ_REDIS_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "dtq.redis.urlSecret" . }}
      key: username
      optional: true
{{- end }}
{{- if .Values.redis.passwordSecret.name }}
- name: DTQ_REDIS_PASSWORD_FILE
  value: /etc/dtq/redis-password/password
{{- else }}
- name: DTQ_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "dtq.redis.urlSecret" . }}
      key: password
      optional: true
{{- end }}
{{- if .Values.redis.tls.caSecret.name }}
- name: DTQ_REDIS_CA_FILE
  value: /etc/dtq/redis-ca/ca.crt
{{- end }}
{{- end }}

{{/* The volumes behind DTQ_REDIS_PASSWORD_FILE and DTQ_REDIS_CA_FILE. */}}
{{- define "dtq.redis.volumes" -}}
{{- with .Values.redis.passwordSecret }}
{{- if .name }}
- name: redis-password
  secret:
    secretName: {{ .name }}
    items:
    - key: {{ .key }}
      path: password
{{- end }}
{{- end }}
{{- with .Values.redis.tls.caSecret }}
{{- if .name }}
- name: redis-ca
  secret:
    secretName: {{ .name }}
    items:
    - key: {{ .key }}
      path: ca.crt
{{- end }}
{{- end }}
{{- end }}

{{- define "dtq.redis.volumeMounts" -}}
{{- if .Values.redis.passwordSecret.name }}
- name: redis-password
  mountPath: /etc/dtq/redis-password
  readOnly: true
{{- end }}
{{- if .Values.redis.tls.caSecret.name }}
- name: redis-ca
  mountPath: /etc/dtq/redis-ca
  readOnly: true
{{- end }}
{{- end }}

{{/* The container securityContext of the restricted Pod Security Standard. */}}
{{- define "dtq.containerSecurityContext" -}}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
runAsNonRoot: true
capabilities:
  drop:
  - "ALL"
{{- end }}

{{/* The pod securityContext of the restricted Pod Security Standard; 65532 is the images' user. */}}
{{- define "dtq.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}
