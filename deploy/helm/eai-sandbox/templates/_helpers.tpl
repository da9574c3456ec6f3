{{/* Names and labels shared by every template. */}}
{{- define "eai.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eai.fullname" -}}
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

{{- define "eai.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "eai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "eai.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: control-plane
{{- end -}}

{{- define "eai.pgSelectorLabels" -}}
app.kubernetes.io/name: {{ include "eai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: postgresql
{{- end -}}

{{- define "eai.serviceAccountName" -}}
{{- include "eai.fullname" . -}}
{{- end -}}

{{- define "eai.pgFullname" -}}
{{- printf "%s-postgresql" (include "eai.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Secret and key holding the database URL. */}}
{{- define "eai.dbSecretName" -}}
{{- if and (not .Values.postgresql.enabled) .Values.postgresql.existingSecret -}}
{{- .Values.postgresql.existingSecret -}}
{{- else -}}
{{- printf "%s-db" (include "eai.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "eai.dbSecretKey" -}}
{{- if and (not .Values.postgresql.enabled) .Values.postgresql.existingSecret -}}
{{- .Values.postgresql.existingSecretKey -}}
{{- else -}}
url
{{- end -}}
{{- end -}}

{{- define "eai.pepperSecretName" -}}
{{- default (printf "%s-pepper" (include "eai.fullname" .)) .Values.controlPlane.pepperSecret -}}
{{- end -}}

{{/* A random value kept across upgrades: the live Secret's value when it exists. */}}
{{- define "eai.keepRandom" -}}
{{- $s := lookup "v1" "Secret" .ns .name -}}
{{- if and $s $s.data (hasKey $s.data .key) -}}
{{- index $s.data .key | b64dec -}}
{{- else -}}
{{- randAlphaNum 32 -}}
{{- end -}}
{{- end -}}

{{/* The API-key pepper: 64 lowercase hex characters (32 bytes), what eaid
requires; the live Secret's value when it exists and has that form (a value
of another form never let eaid start, so nothing was peppered with it). */}}
{{- define "eai.keepPepper" -}}
{{- $s := lookup "v1" "Secret" .ns .name -}}
{{- $v := "" -}}
{{- if and $s $s.data (hasKey $s.data "pepper") -}}
{{- $v = index $s.data "pepper" | b64dec -}}
{{- end -}}
{{- if regexMatch "^[0-9a-f]{64}$" $v -}}
{{- $v -}}
{{- else -}}
{{- randAlphaNum 64 | sha256sum -}}
{{- end -}}
{{- end -}}

{{- define "eai.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* RuntimeClass of a profile: its own, else sandbox.runtimeClass. */}}
{{- define "eai.profileRuntimeClass" -}}
{{- default .sb.runtimeClass .p.runtimeClass -}}
{{- end -}}

{{/* Every RuntimeClass the profiles use, sorted, comma-separated. */}}
{{- define "eai.usedRuntimeClasses" -}}
{{- $sb := .Values.sandbox -}}
{{- $used := list -}}
{{- range $name, $p := $sb.profiles -}}
{{- $used = append $used (include "eai.profileRuntimeClass" (dict "p" $p "sb" $sb)) -}}
{{- end -}}
{{- $used | uniq | sortAlpha | join "," -}}
{{- end -}}

{{/* Labels of the migration Job's pod. */}}
{{- define "eai.migrateSelectorLabels" -}}
app.kubernetes.io/name: {{ include "eai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: migrate
{{- end -}}

{{/* Key of the schema owner's URL in the database Secret. */}}
{{- define "eai.dbMigrateKey" -}}
{{- if and (not .Values.postgresql.enabled) .Values.postgresql.existingSecret -}}
{{- .Values.postgresql.existingSecretMigrateKey -}}
{{- else if or .Values.postgresql.enabled .Values.postgresql.migrateUrl -}}
migrateUrl
{{- else -}}
url
{{- end -}}
{{- end -}}

{{/* "true" when the bundled PostgreSQL is on with the migration: it is then
part of the release (deleted by `helm uninstall`), so nothing can migrate it
before install; eaid's pods migrate it in an init container at install and
the Job runs before upgrades only (docs/helm.md "Migrations"). */}}
{{- define "eai.migrateInInit" -}}
{{- if and .Values.controlPlane.enabled .Values.migration.enabled .Values.postgresql.enabled -}}true{{- end -}}
{{- end -}}

{{/* Hook annotations of what the migration Job needs before install. */}}
{{- define "eai.preInstallHook" -}}
helm.sh/hook: {{ .on | default "pre-install,pre-upgrade" }}
helm.sh/hook-weight: {{ .weight | quote }}
helm.sh/hook-delete-policy: before-hook-creation
{{- end -}}
