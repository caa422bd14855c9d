{{/*
Names are fixed, as in manifests/: the operator is one per cluster (its CRDs, GpuInventories
and GpuNode records are cluster-scoped), and a second release fails on the ClusterRoles that
the first one owns instead of running a second operator.
*/}}

{{/* The labels of every object, the same as manifests/ sets. */}}
{{- define "gpu-inventory-operator.labels" -}}
app.kubernetes.io/name: gpu-inventory-operator
{{- end }}

{{- define "gpu-inventory-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Fails the render on values that cannot work together. */}}
{{- define "gpu-inventory-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas=%d needs leaderElection.enabled=true: without leader election every replica writes the inventories. Set replicas=1 or leaderElection.enabled=true." (int .Values.replicas)) }}
{{- end }}
{{- end }}

{{/* The labels of the Prometheus Operator's objects: monitoring.labels added. */}}
{{- define "gpu-inventory-operator.monitoringLabels" -}}
{{- toYaml (merge (dict "app.kubernetes.io/name" "gpu-inventory-operator") .Values.monitoring.labels) }}
{{- end }}

{{/*
A PrometheusRule of files/ (a copy of manifests/monitoring, checked by manifests/chart_test.go)
in the release namespace, with the monitoring labels. Called with (list $ "files/NAME").
*/}}
{{- define "gpu-inventory-operator.prometheusRule" -}}
{{- $root := index . 0 }}
{{- $rule := $root.Files.Get (index . 1) | fromYaml }}
{{- $_ := set $rule.metadata "namespace" $root.Release.Namespace }}
{{- $_ := set $rule.metadata "labels" (include "gpu-inventory-operator.monitoringLabels" $root | fromYaml) }}
{{- toYaml $rule }}
{{- end }}
