{{- define "mbp.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mbp.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mbp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mbp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mbp.labels" -}}
{{ include "mbp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mbp.secretName" -}}
{{- if .Values.secrets.create -}}
{{- include "mbp.fullname" . -}}
{{- else -}}
{{- required "secrets.existingSecret: the Secret holding the master token (or secrets.create: true for a demo)" .Values.secrets.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The upstream MCP endpoint: 127.0.0.1 in the pod, or the gateway's Service. */}}
{{- define "mbp.upstreamUrl" -}}
{{- if eq .Values.mode "sidecar" -}}
{{- printf "http://127.0.0.1:%d%s" (int .Values.mcpServer.port) .Values.mcpServer.path -}}
{{- else if .Values.upstream.url -}}
{{- .Values.upstream.url -}}
{{- else -}}
{{- $service := required "upstream.url or upstream.service: where the MCP server is (mode: gateway)" .Values.upstream.service -}}
{{- printf "http://%s.%s.svc:%d%s" $service .Release.Namespace (int .Values.upstream.port) .Values.upstream.path -}}
{{- end -}}
{{- end -}}

{{/* REDIS_URL built from redis.*, the password by reference to the variable before it. */}}
{{- define "mbp.redisUrl" -}}
{{- $r := .Values.redis -}}
{{- $scheme := ternary "rediss" "redis" $r.tls -}}
{{- if eq $r.topology "sentinel" }}{{ $scheme = printf "%s+sentinel" $scheme }}{{ end -}}
{{- if eq $r.topology "cluster" }}{{ $scheme = printf "%s+cluster" $scheme }}{{ end -}}
{{- $auth := "" -}}
{{- if .Values.secrets.keys.redisPassword -}}
{{- $auth = printf "%s:$(REDIS_PASSWORD)@" $r.username -}}
{{- else if $r.username -}}
{{- $auth = printf "%s@" $r.username -}}
{{- end -}}
{{- if not $r.hosts }}{{ fail "redis.hosts: at least one host:port" }}{{ end -}}
{{- $hosts := join "," $r.hosts -}}
{{- $path := "" -}}
{{- if eq $r.topology "sentinel" -}}
{{- $path = printf "/%s/%d" (required "redis.masterName: the primary the Sentinels monitor" $r.masterName) (int $r.db) -}}
{{- else if eq $r.topology "standalone" -}}
{{- $path = printf "/%d" (int $r.db) -}}
{{- end -}}
{{- printf "%s://%s%s%s" $scheme $auth $hosts $path -}}
{{- end -}}

{{- define "mbp.secretEnv" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- $key := index . 2 -}}
{{- if $key }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "mbp.secretName" $ctx }}
      key: {{ $key }}
{{- end }}
{{- end -}}

{{/* Set by the chart from other values; refused in env/extraEnv so that nothing silently overrides them. */}}
{{- define "mbp.reservedEnv" -}}
BEARER_SECRET_MASTER REDIS_URL REDIS_PASSWORD UPSTREAM_URL UPSTREAM_CREDENTIALS_KEY IDP_CLIENT_SECRET SCIM_TOKEN HOST PORT ADMIN_HOST ADMIN_PORT PUBLIC_URL WORKERS MCP_AUTH_CONFIG
{{- end -}}

{{- define "mbp.env" -}}
{{- $reserved := splitList " " (include "mbp.reservedEnv" .) -}}
{{- range $name, $value := .Values.env }}
{{- if has $name $reserved }}{{ fail (printf "env.%s is set by the chart from other values" $name) }}{{ end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if has .name $reserved }}{{ fail (printf "extraEnv %s is set by the chart from other values" .name) }}{{ end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- include "mbp.secretEnv" (list . "BEARER_SECRET_MASTER" (required "secrets.keys.masterToken" .Values.secrets.keys.masterToken)) }}
{{- if .Values.redis.topology }}
{{- if not (has .Values.redis.topology (list "standalone" "sentinel" "cluster")) }}{{ fail "redis.topology: empty, standalone, sentinel or cluster" }}{{ end }}
{{- include "mbp.secretEnv" (list . "REDIS_PASSWORD" .Values.secrets.keys.redisPassword) }}
- name: REDIS_URL
  value: {{ include "mbp.redisUrl" . | quote }}
{{- else }}
{{- if .Values.secrets.create }}{{ fail "secrets.create makes a Secret with the master token only: set redis.topology and redis.hosts" }}{{ end }}
{{- include "mbp.secretEnv" (list . "REDIS_URL" (required "secrets.keys.redisUrl (or redis.topology)" .Values.secrets.keys.redisUrl)) }}
{{- end }}
{{- if .Values.secrets.create }}
{{- if or .Values.secrets.keys.upstreamCredentialsKey .Values.secrets.keys.idpClientSecret .Values.secrets.keys.scimToken .Values.secrets.keys.redisPassword }}
{{- fail "secrets.create makes a Secret with the master token only: use secrets.existingSecret for the other keys" }}
{{- end }}
{{- end }}
{{- include "mbp.secretEnv" (list . "UPSTREAM_CREDENTIALS_KEY" .Values.secrets.keys.upstreamCredentialsKey) }}
{{- include "mbp.secretEnv" (list . "IDP_CLIENT_SECRET" .Values.secrets.keys.idpClientSecret) }}
{{- include "mbp.secretEnv" (list . "SCIM_TOKEN" .Values.secrets.keys.scimToken) }}
- name: UPSTREAM_URL
  value: {{ include "mbp.upstreamUrl" . | quote }}
- name: PUBLIC_URL
  value: {{ required "publicUrl: the base URL clients use" .Values.publicUrl | quote }}
- name: HOST
  value: "0.0.0.0"
- name: PORT
  value: {{ .Values.ports.proxy | quote }}
- name: ADMIN_HOST
  value: {{ ternary "0.0.0.0" "127.0.0.1" (eq .Values.probes.mode "httpGet") | quote }}
- name: ADMIN_PORT
  value: {{ .Values.ports.admin | quote }}
- name: WORKERS
{{- if ne (toString .Values.workers) "auto" }}
  value: {{ .Values.workers | int | toString | quote }}
{{- else if and .Values.resources.limits .Values.resources.limits.cpu }}
  valueFrom:
    resourceFieldRef:
      resource: limits.cpu
      divisor: "1"
{{- else }}
  value: "1"
{{- end }}
- name: MCP_AUTH_CONFIG
  value: /etc/mcp-bearer-proxy/config.yaml
{{- end -}}

{{- define "mbp.probe" -}}
{{- $ctx := index . 0 -}}
{{- $path := index . 1 -}}
{{- if eq $ctx.Values.probes.mode "httpGet" }}
httpGet:
  path: {{ $path }}
  port: admin
{{- else if eq $ctx.Values.probes.mode "exec" }}
exec:
  command:
    - node
    - -e
    - {{ printf "fetch('http://127.0.0.1:'+process.env.ADMIN_PORT+'%s').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))" $path | quote }}
{{- else }}
{{- fail "probes.mode: httpGet or exec" }}
{{- end }}
{{- end -}}

{{/* The sidecar's config.yaml (the ConfigMap's, and the migrate Job's copy of it). */}}
{{- define "mbp.configYaml" -}}
{{- mustMergeOverwrite (deepCopy .Values.config) (dict "proxy" (dict "shutdownGraceMs" (mul (int .Values.shutdownGraceSeconds) 1000))) | toYaml -}}
{{- end -}}

{{/* The sidecar's container; in the sidecar shape an init container that runs for the pod's life. */}}
{{- define "mbp.container" -}}
- name: mcp-bearer-proxy
  image: {{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if eq .Values.mode "sidecar" }}
  restartPolicy: Always
  {{- end }}
  ports:
    - name: proxy
      containerPort: {{ .Values.ports.proxy }}
    - name: admin
      containerPort: {{ .Values.ports.admin }}
  env:
    {{- include "mbp.env" . | trim | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/mcp-bearer-proxy
      readOnly: true
  startupProbe:
    {{- include "mbp.probe" (list . "/livez") | trim | nindent 4 }}
    {{- toYaml .Values.probes.startup | nindent 4 }}
  livenessProbe:
    {{- include "mbp.probe" (list . "/livez") | trim | nindent 4 }}
    {{- toYaml .Values.probes.liveness | nindent 4 }}
  readinessProbe:
    {{- include "mbp.probe" (list . .Values.probes.readinessPath) | trim | nindent 4 }}
    {{- toYaml .Values.probes.readiness | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
{{- end -}}

{{/* Above the sidecar's drain (and, in the sidecar shape, the MCP server's preStop sleep before it). */}}
{{- define "mbp.terminationGrace" -}}
{{- $drain := int .Values.shutdownGraceSeconds -}}
{{- if eq .Values.mode "sidecar" }}{{ $drain = add $drain (int .Values.mcpServer.preStopSleepSeconds) }}{{ end -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $drain 15 -}}
{{- else if le (int .Values.terminationGracePeriodSeconds) $drain -}}
{{- fail (printf "terminationGracePeriodSeconds must be above %d s (the drain it has to cover)" $drain) -}}
{{- else -}}
{{- .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}
