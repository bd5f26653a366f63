{{/* Labels Helm's conventions put on every object of the release. */}}
{{- define "mcpfleet-crds.labels" -}}
app.kubernetes.io/part-of: mcpfleet
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}
