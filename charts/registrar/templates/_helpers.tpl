{{/* The chart's name. */}}
{{- define "registrar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: the release name, with the chart name appended unless the
release name contains it. `helm install registrar` gives the names config/default uses
(registrar-controller-manager, registrar-webhook-service, ...).
*/}}
{{- define "registrar.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "registrar.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "registrar.labels" -}}
helm.sh/chart: {{ include "registrar.chart" . }}
{{ include "registrar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The manager pods' labels that Services and the Deployment select on. */}}
{{- define "registrar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "registrar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "registrar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-controller-manager" (include "registrar.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "registrar.webhookServiceName" -}}
{{- printf "%s-webhook-service" (include "registrar.fullname" .) }}
{{- end }}

{{- define "registrar.webhookConfigName" -}}
{{- printf "%s-mutating-webhook-configuration" (include "registrar.fullname" .) }}
{{- end }}

{{/* The Secret the serving certificate is mounted from (certManager and secret modes). */}}
{{- define "registrar.webhookSecretName" -}}
{{- if eq .Values.webhook.certificate.mode "secret" }}
{{- required "webhook.certificate.secretName is required with webhook.certificate.mode=secret" .Values.webhook.certificate.secretName }}
{{- else }}
{{- printf "%s-webhook-server-cert" (include "registrar.fullname" .) }}
{{- end }}
{{- end }}

{{- define "registrar.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Fails on combinations the manager cannot run. */}}
{{- define "registrar.validate" -}}
{{- $mode := .Values.webhook.certificate.mode }}
{{- if not (has $mode (list "certManager" "selfSigned" "secret")) }}
{{- fail (printf "webhook.certificate.mode %q: want certManager, selfSigned or secret" $mode) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled: only the leader may write to the stores" }}
{{- end }}
{{- if and (eq $mode "secret") .Values.webhook.enabled (not .Values.webhook.certificate.caBundle) }}
{{- fail "webhook.certificate.mode=secret needs webhook.certificate.caBundle (base64 PEM of the CA that signed the Secret's certificate)" }}
{{- end }}
{{- if and (include "registrar.bundledStore" .) .Values.store.tls.secretName }}
{{- fail "store.tls.secretName is for your own etcd (store.endpoints); the bundled one (etcd.enabled) has a PKI the manager makes" }}
{{- end }}
{{- if and (include "registrar.bundledStore" .) (lt (int .Values.etcd.replicas) 1) }}
{{- fail "etcd.replicas: want 1 (a single-node cluster) or more (3 keep a quorum with one member gone)" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled" }}
{{- end }}
{{- $xdsBind := .Values.xds.bindAddress }}
{{- $xdsLoopback := or (hasPrefix "127." $xdsBind) (hasPrefix "localhost:" $xdsBind) (hasPrefix "[::1]:" $xdsBind) }}
{{- $xdsByArgs := false }}
{{- range .Values.extraArgs }}
{{- if or (hasPrefix "--xds-cert-file" .) (hasPrefix "--xds-allow-insecure" .) }}
{{- $xdsByArgs = true }}
{{- end }}
{{- end }}
{{- if and $xdsBind (not $xdsLoopback) (not .Values.xds.tls.secretName) (not .Values.xds.allowInsecure) (not $xdsByArgs) }}
{{- fail (printf "xds.bindAddress %q serves xDS beyond the pod in plaintext, and xDS has no authentication of its own: set xds.tls.secretName (a Secret with tls.crt and tls.key), or xds.allowInsecure=true to accept that any pod reaching the port reads every service's endpoints (--xds-allow-insecure)" $xdsBind) }}
{{- end }}
{{- end }}

{{/* Non-empty when the chart deploys the bundled etcd: etcd.enabled and no store.endpoints. */}}
{{- define "registrar.bundledStore" -}}
{{- if and .Values.etcd.enabled (not .Values.store.endpoints) }}true{{ end }}
{{- end }}

{{- define "registrar.etcdSelectorLabels" -}}
app.kubernetes.io/name: {{ include "registrar.name" . }}-etcd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "registrar.etcdLabels" -}}
helm.sh/chart: {{ include "registrar.chart" . }}
{{ include "registrar.etcdSelectorLabels" . }}
app.kubernetes.io/part-of: registrar
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "registrar.etcdImage" -}}
{{- if .Values.etcd.image.digest }}
{{- printf "%s@%s" .Values.etcd.image.repository .Values.etcd.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.etcd.image.repository .Values.etcd.image.tag }}
{{- end }}
{{- end }}

{{/* The manager's store endpoints of the bundled etcd ($(POD_NAMESPACE) is expanded by the kubelet). */}}
{{- define "registrar.etcdEndpoints" -}}
{{- $name := printf "%s-etcd" (include "registrar.fullname" .) }}
{{- range $i := until (int .Values.etcd.replicas) }}{{ if $i }},{{ end }}https://{{ $name }}-{{ $i }}.{{ $name }}.$(POD_NAMESPACE).svc:2379{{ end }}
{{- end }}
