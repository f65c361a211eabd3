{{/*
The chart's name, overridable with nameOverride (63 characters: a DNS label).
*/}}
{{- define "database-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified name of this release's objects: fullnameOverride, else the release name
when it already contains the chart's name, else "<release>-<chart>".
*/}}
{{- define "database-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"<chart>-<version>", for the helm.sh/chart label.
*/}}
{{- define "database-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels that select this release's operator pods (never change them: selectors are immutable).
*/}}
{{- define "database-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "database-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The standard labels of every object of this chart.
*/}}
{{- define "database-operator.labels" -}}
helm.sh/chart: {{ include "database-operator.chart" . }}
{{ include "database-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: database-operator
{{- end }}

{{/*
The ServiceAccount the operator runs as: created (serviceAccount.create) or brought by the user.
*/}}
{{- define "database-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "database-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator's image reference: a digest wins over a tag; the tag defaults to appVersion.
*/}}
{{- define "database-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
Leader election is on when asked for, and always with more than one replica: replicas without
it would all reconcile the same Databases.
*/}}
{{- define "database-operator.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{/*
The Lease's name for the shard in .shard ("": no shards): leaderElection.leaseName (default:
the release's full name), "-<shard>" added per shard. Called with (dict "root" $ "shard" $shard).
*/}}
{{- define "database-operator.leaseName" -}}
{{- $name := .root.Values.leaderElection.leaseName | default (include "database-operator.fullname" .root) }}
{{- if .shard }}{{ printf "%s-%s" $name .shard }}{{ else }}{{ $name }}{{ end }}
{{- end }}

{{/*
Where cert-manager's webhook certificate is mounted in the operator's container.
*/}}
{{- define "database-operator.webhookCertDir" -}}
/etc/database-operator/webhook
{{- end }}

{{/*
"<namespace>/<certificate>" for cert-manager's CA injector (cert-manager.io/inject-ca-from).
*/}}
{{- define "database-operator.injectCaFrom" -}}
{{- printf "%s/%s-webhook" .Release.Namespace (include "database-operator.fullname" .) }}
{{- end }}

{{/*
OTEL_RESOURCE_ATTRIBUTES: the release's namespace and tracing.resourceAttributes, k=v,k=v.
*/}}
{{- define "database-operator.resourceAttributes" -}}
{{- $attributes := merge (dict) .Values.tracing.resourceAttributes (dict "k8s.namespace.name" .Release.Namespace) }}
{{- $pairs := list }}
{{- range $key := keys $attributes | sortAlpha }}
{{- $pairs = append $pairs (printf "%s=%s" $key (get $attributes $key)) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}
