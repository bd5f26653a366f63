{{/* The chart name (app.kubernetes.io/name). */}}
{{- define "mcpfleet-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object: the release name when it contains the chart name (so the release
"mcpfleet-operator" gives the kustomize install's names), else "<release>-<chart>". */}}
{{- define "mcpfleet-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "mcpfleet-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Selects the operator pods of this release (immutable on the Deployment). */}}
{{- define "mcpfleet-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpfleet-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object: the kustomize install's two, plus Helm's conventions. */}}
{{- define "mcpfleet-operator.labels" -}}
{{ include "mcpfleet-operator.selectorLabels" . }}
app.kubernetes.io/part-of: mcpfleet
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "mcpfleet-operator.serviceAccountName" -}}
{{- default (include "mcpfleet-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "mcpfleet-operator.leaseName" -}}
{{- default (include "mcpfleet-operator.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The operator image: repository@digest, else repository:tag. */}}
{{- define "mcpfleet-operator.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}
{{- end -}}

{{/* Selects the console pods of this release: a name of their own, so that the operator's
Deployment and Services (which select mcpfleet-operator pods) never select them. */}}
{{- define "mcpfleet-operator.consoleSelectorLabels" -}}
app.kubernetes.io/name: mcpfleet-console
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
