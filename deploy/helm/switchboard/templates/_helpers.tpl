{{/* The name of the chart's objects: the release name, or release-chart. */}}
{{- define "switchboard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchboard.labels" -}}
{{ include "switchboard.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The in-chart Redis's labels: a name of its own, so that the Service, the Deployment and the
PodDisruptionBudget of Switchboard never select its pod. */}}
{{- define "switchboard.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-redis
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Redis URL of cluster mode: cluster.redis.url, or the in-chart Redis's Service; the
values' combination is checked here, once, for every template that needs it. */}}
{{- define "switchboard.redisURL" -}}
{{- if not .Values.cluster.keysSecret -}}
{{- fail "cluster.enabled needs cluster.keysSecret: an existing Secret whose key `keys` holds the sealing secrets (docs/cluster.md)" -}}
{{- end -}}
{{- if and .Values.cluster.redis.url .Values.cluster.redis.deploy -}}
{{- fail "cluster.redis: give url or deploy: true, not both" -}}
{{- else if .Values.cluster.redis.url -}}
{{- .Values.cluster.redis.url -}}
{{- else if .Values.cluster.redis.deploy -}}
{{- printf "redis://%s-redis:6379/0" (include "switchboard.fullname" .) -}}
{{- else -}}
{{- fail "cluster.enabled needs a Redis: cluster.redis.url, or cluster.redis.deploy: true" -}}
{{- end -}}
{{- end -}}
