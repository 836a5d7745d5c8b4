{{- define "sandhold.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandhold.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sandhold.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sandhold.secretName" -}}
{{- default (include "sandhold.fullname" .) .Values.existingSecret -}}
{{- end -}}


{{- /* single: one node on SQLite (no PostgreSQL); cluster: nodes sharing PostgreSQL */ -}}
{{- define "sandhold.single" -}}
{{- if eq .Values.mode "single" }}true{{ end -}}
{{- end -}}

{{- define "sandhold.replicas" -}}
{{- if include "sandhold.single" . }}1{{ else }}{{ .Values.replicas }}{{ end -}}
{{- end -}}

{{- /* The image by digest (make image prints it); a tag only when asked for. */ -}}
{{- define "sandhold.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else if .Values.image.tag -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- else -}}
{{ required "image.digest is required: `make image` prints it (or set image.tag to run a tag)" .Values.image.digest }}
{{- end -}}
{{- end -}}

{{- /* Host headers the server accepts: allowedHosts and the Ingress's hosts. */ -}}
{{- define "sandhold.allowedHosts" -}}
{{- $h := list -}}
{{- range .Values.allowedHosts }}{{ $h = append $h . }}{{ end -}}
{{- if .Values.ingress.enabled }}{{ range .Values.ingress.hosts }}{{ $h = append $h . }}{{ end }}{{ end -}}
{{- join "," (uniq $h) -}}
{{- end -}}
