{{/* The labels every object carries: kustomize's part-of label, and Helm's own. */}}
{{- define "vk-provider.labels" -}}
app.kubernetes.io/part-of: vk-provider
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The one image of the node, the router and the controller. */}}
{{- define "vk-provider.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* The hardened security context every container runs with (the image's user is 65532). */}}
{{- define "vk-provider.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}

{{- define "vk-provider.podSpecCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A component's ServiceAccount name: its `serviceAccount.name`, else vk-provider-<component>.
Called with (list $ "node"), and likewise for "router" and "controller". */}}
{{- define "vk-provider.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $account := (index $root.Values $component).serviceAccount | default dict -}}
{{- $account.name | default (printf "vk-provider-%s" $component) -}}
{{- end }}

{{/* A component's ServiceAccount, when the chart creates it; `annotations` carry workload identity
(IRSA's eks.amazonaws.com/role-arn, GKE's iam.gke.io/gcp-service-account, ...). */}}
{{- define "vk-provider.serviceAccount" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $account := (index $root.Values $component).serviceAccount | default dict -}}
{{- if $account.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  labels:
    {{- include "vk-provider.labels" $root | nindent 4 }}
  name: {{ include "vk-provider.serviceAccountName" (list $root $component) }}
  namespace: {{ $root.Release.Namespace }}
  {{- with $account.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
---
{{- end }}
{{- end }}

{{/* The probes of a leader-elected daemon: every replica answers them, leader or standby
(vk_provider/kit/probes.py). Called with the port (a name or a number). Startup allows a minute for
a slow first connection to the apiserver; liveness restarts a wedged process after 30 s. */}}
{{- define "vk-provider.daemonProbes" -}}
startupProbe:
  httpGet: {path: /healthz, port: {{ . }}}
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet: {path: /healthz, port: {{ . }}}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: {{ . }}}
  periodSeconds: 5
  timeoutSeconds: 3
{{- end }}

{{/* A list of names as CEL string literals, comma-separated: 'a', 'b'. Names are DNS labels (the
schema's and the nodes' patterns), so no quote needs escaping. */}}
{{- define "vk-provider.celStrings" -}}
{{- $quoted := list }}
{{- range . }}{{ $quoted = append $quoted (printf "'%s'" .) }}{{ end }}
{{- join ", " $quoted }}
{{- end }}
