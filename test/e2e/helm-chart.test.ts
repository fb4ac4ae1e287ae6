// The Helm chart (deploy/helm/mcp-bearer-proxy) with a real helm, no cluster: `helm lint --strict` and
// `helm template` for every values example docs/kubernetes.md names, every rendered object checked
// against the Kubernetes API types (kubernetes-models, unknown fields included) and for the chart's
// security properties; then the rendered pod brought up as local processes, its command, environment
// and config file taken from the rendered objects, and its probes asked as the kubelet asks them.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv } from 'ajv';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { CONFIG_KEYS } from '../../src/config/keys.ts';
import { keysOf } from '../../src/config/spec.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { unpackHelm, type Helm } from '../support/helm.ts';
import { declareKubeTypes, kubeProblems, modelValidates, type KubeObject } from '../support/kube-schema.ts';
import { freePort, startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { spawnProcess, type Started } from '../support/process.ts';
import { RUN_TS } from '../support/node-ts.ts';
import { layoutOneCode } from '../support/layout-1.ts';

const CHART = 'deploy/helm/mcp-bearer-proxy';
const EXAMPLES = `${CHART}/examples`;
const SIDECAR = 'mcp-bearer-proxy';
/** Environment variables that hold secrets: every key the config declares secret, and the chart's own. */
const SECRET_ENV = new Set([
  ...keysOf(CONFIG_KEYS).flatMap(([, spec]) => (spec.doc.secret && spec.doc.env ? [spec.doc.env] : [])),
  'REDIS_PASSWORD',
]);

/** What the test's Secret holds under each key the examples name (test values, never real ones). */
const TEST_SECRETS: Record<string, string> = {
  BEARER_SECRET_MASTER: generateToken(),
  REDIS_URL: 'redis://127.0.0.1:6379',
  REDIS_PASSWORD: 'pa%40ss',
  UPSTREAM_CREDENTIALS_KEY: generateToken(),
  IDP_CLIENT_SECRET: 'test-client-secret',
  // The sidecar checks it as it checks the master token (SCIM on the admin listener).
  SCIM_TOKEN: generateToken(),
};

type Obj = KubeObject & { metadata: { name: string; annotations?: Record<string, string> }; spec?: any; data?: Record<string, string> };
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string };
    resourceFieldRef?: { resource: string; divisor?: string };
  };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: Array<{ name?: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  resources?: { limits?: { cpu?: string } };
  restartPolicy?: string;
  securityContext?: any;
  lifecycle?: any;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}
interface Probe {
  httpGet?: { path: string; port: number | string };
  exec?: { command: string[] };
  timeoutSeconds?: number;
}

let helm: Helm;

beforeAll(() => {
  helm = unpackHelm();
});
afterAll(() => helm?.remove());

function examplesOnDisk(): string[] {
  return readdirSync(EXAMPLES)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
}

function render(valuesFiles: string[], set: string[] = []): Obj[] {
  const args = ['template', 'mbp', CHART, '--namespace', 'tools', '--kube-version', '1.30.0'];
  for (const f of valuesFiles) args.push('-f', f);
  for (const s of set) args.push('--set', s);
  const result = helm.run(args);
  expect(result.stderr, `helm ${args.join(' ')}`).toBe('');
  expect(result.status).toBe(0);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}

function renderError(values: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-values-'));
  try {
    writeFileSync(join(dir, 'values.yaml'), stringify(values));
    const result = helm.run(['template', 'mbp', CHART, '-f', join(dir, 'values.yaml')]);
    expect(result.status, 'helm template refuses these values').not.toBe(0);
    return result.stderr;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether Helm runs this object as a hook (the migrate Job and its ConfigMap), not as one of the release's own. */
function isHook(o: Obj): boolean {
  return o.metadata.annotations?.['helm.sh/hook'] !== undefined;
}

/** The one object of this kind the release itself holds (hooks aside). */
function one(objects: Obj[], kind: string): Obj {
  const found = objects.filter((o) => o.kind === kind && !isHook(o));
  expect(found.map((o) => o.kind)).toEqual([kind]);
  return found[0]!;
}

/** The migrate Job and the ConfigMap it reads, when `migrate.enabled`. */
function migrateHooks(objects: Obj[]): { job: Obj; config: Obj } | undefined {
  const hooks = objects.filter(isHook);
  if (hooks.length === 0) return undefined;
  expect(hooks.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Job']);
  return { job: hooks.find((o) => o.kind === 'Job')!, config: hooks.find((o) => o.kind === 'ConfigMap')! };
}

function podSpec(objects: Obj[]): any {
  return one(objects, 'Deployment').spec.template.spec;
}

function sidecarContainer(objects: Obj[]): Container {
  const pod = podSpec(objects);
  const all: Container[] = [...(pod.initContainers ?? []), ...pod.containers];
  const found = all.filter((c) => c.name === SIDECAR);
  expect(found).toHaveLength(1);
  return found[0]!;
}

function portNumber(container: Container, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = container.ports?.find((p) => p.name === port);
  expect(named, `container port named ${port}`).toBeDefined();
  return named!.containerPort;
}

function envOf(container: Container, name: string): EnvVar | undefined {
  return container.env?.find((e) => e.name === name);
}

// PodMonitor is a custom resource (the Prometheus Operator's), not in kubernetes-models: checked more
// loosely, against the subset of its CRD schema (monitoring.coreos.com/v1, prometheus-operator's API
// reference) that the chart can render, unknown fields refused.
const podMonitorSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: { const: 'monitoring.coreos.com/v1' },
    kind: { const: 'PodMonitor' },
    metadata: {
      type: 'object',
      required: ['name'],
      additionalProperties: false,
      properties: { name: { type: 'string' }, labels: { type: 'object', additionalProperties: { type: 'string' } } },
    },
    spec: {
      type: 'object',
      required: ['selector'],
      additionalProperties: false,
      properties: {
        selector: {
          type: 'object',
          additionalProperties: false,
          properties: { matchLabels: { type: 'object', additionalProperties: { type: 'string' } } },
        },
        podMetricsEndpoints: {
          type: 'array',
          items: {
            type: 'object',
            additionalProperties: false,
            properties: {
              port: { type: 'string' },
              path: { type: 'string' },
              interval: {
                type: 'string',
                pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$',
              },
            },
          },
        },
      },
    },
  },
};
const checkPodMonitor = new Ajv({ allErrors: true, strict: true }).compile(podMonitorSchema);

async function schemaProblems(objects: Obj[]): Promise<Record<string, string[]>> {
  declareKubeTypes(objects.filter((o) => o.apiVersion !== 'monitoring.coreos.com/v1'));
  const problems: Record<string, string[]> = {};
  for (const o of objects) {
    const found =
      o.kind === 'PodMonitor'
        ? checkPodMonitor(o)
          ? []
          : checkPodMonitor.errors!.map((e) => `${e.instancePath} ${e.message}`)
        : await kubeProblems(o);
    if (found.length > 0) problems[`${o.kind}/${o.metadata.name}`] = found;
  }
  return problems;
}

describe('the chart, rendered by a real helm', () => {
  it('runs the helm unpacked from the npm package, and says its version', () => {
    const result = helm.run(['version', '--short']);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^v\d+\.\d+\.\d+/);
  });

  it('docs/kubernetes.md names every values example, and every example it names exists', () => {
    const named = [
      ...readFileSync('docs/kubernetes.md', 'utf8').matchAll(/deploy\/helm\/mcp-bearer-proxy\/examples\/([\w.-]+\.yaml)/g),
    ].map((m) => m[1]!);
    expect([...new Set(named)].sort()).toEqual(examplesOnDisk());
    expect(examplesOnDisk().length).toBeGreaterThanOrEqual(6);
  });

  describe.each(examplesOnDisk())('example %s', (example) => {
    const file = `${EXAMPLES}/${example}`;
    let objects: Obj[];
    beforeAll(() => {
      objects = render([file]);
    });

    it('passes helm lint --strict', () => {
      const result = helm.run(['lint', '--strict', CHART, '-f', file, '--kube-version', '1.30.0']);
      expect(result.stdout + result.stderr).toContain('0 chart(s) failed');
      expect(result.status).toBe(0);
    });

    it('renders only objects the Kubernetes API accepts (types, required fields, no unknown field)', async () => {
      expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(['Deployment', 'Service', 'ConfigMap', 'NetworkPolicy']));
      expect(await schemaProblems(objects)).toEqual({});
    });

    it('exposes only the proxy port: no Service targets the admin port', () => {
      const sidecar = sidecarContainer(objects);
      const admin = portNumber(sidecar, 'admin');
      const proxy = portNumber(sidecar, 'proxy');
      const services = objects.filter((o) => o.kind === 'Service');
      expect(services.length).toBeGreaterThan(0);
      for (const service of services)
        for (const port of service.spec.ports) {
          expect([admin, 'admin']).not.toContain(port.targetPort);
          expect(port.targetPort).toBe(proxy);
        }
      // The NetworkPolicy admits the admin port only from Prometheus's namespace, and only with the PodMonitor.
      const policy = objects.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'mbp-mcp-bearer-proxy')!;
      const adminRules = policy.spec.ingress.filter((r: any) => r.ports.some((p: any) => p.port === admin));
      const podMonitor = objects.some((o) => o.kind === 'PodMonitor');
      expect(adminRules).toHaveLength(podMonitor ? 1 : 0);
      for (const rule of adminRules) expect(rule.from).toEqual([{ namespaceSelector: { matchLabels: expect.any(Object) } }]);
      expect(objects.some((o) => o.kind === 'ServiceMonitor')).toBe(false);
    });

    it('runs non-root, read-only, without capabilities or a service account token', () => {
      const pod = podSpec(objects);
      const sidecar = sidecarContainer(objects);
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.securityContext.seccompProfile).toEqual({ type: 'RuntimeDefault' });
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
      expect(sidecar.securityContext).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
      expect(sidecar.securityContext.capabilities.add).toBeUndefined();
    });

    it('probes /livez (startup, liveness) and /readyz (readiness) on the admin port', () => {
      const sidecar = sidecarContainer(objects);
      const admin = portNumber(sidecar, 'admin');
      const adminHost = envOf(sidecar, 'ADMIN_HOST')!.value;
      expect(envOf(sidecar, 'ADMIN_PORT')!.value).toBe(String(admin));
      const probes: Array<[Probe | undefined, string]> = [
        [sidecar.startupProbe, '/livez'],
        [sidecar.livenessProbe, '/livez'],
        [sidecar.readinessProbe, '/readyz'],
      ];
      for (const [probe, path] of probes) {
        expect(probe).toBeDefined();
        if (probe!.httpGet) {
          // From the node, to the pod's address: the admin listener must be on the pod network.
          expect(adminHost).toBe('0.0.0.0');
          expect(probe!.httpGet.path).toBe(path);
          expect(portNumber(sidecar, probe!.httpGet.port)).toBe(admin);
        } else {
          expect(adminHost).toBe('127.0.0.1');
          expect(probe!.exec!.command.join(' ')).toContain(`'http://127.0.0.1:'+process.env.ADMIN_PORT+'${path}'`);
        }
      }
    });

    it('takes every secret by reference: no secret value in the rendered pod or config', () => {
      const sidecar = sidecarContainer(objects);
      const secretNames = new Set(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name));
      for (const variable of sidecar.env!) {
        if (SECRET_ENV.has(variable.name)) {
          expect(variable.value, variable.name).toBeUndefined();
          expect(variable.valueFrom?.secretKeyRef?.name, variable.name).toBeTruthy();
        }
        if (variable.name === 'REDIS_URL' && variable.value !== undefined) {
          // Built from values: any password is the reference to REDIS_PASSWORD, expanded by the kubelet.
          // (A Sentinel or Cluster URL lists several hosts: not a WHATWG URL, so its user info is read by hand.)
          const userInfo = /^[a-z+]+:\/\/(?:([^@/]*)@)?/.exec(variable.value)![1] ?? '';
          const password = userInfo.includes(':') ? userInfo.slice(userInfo.indexOf(':') + 1) : '';
          expect(['', '$(REDIS_PASSWORD)']).toContain(password);
        }
      }
      const master = envOf(sidecar, 'BEARER_SECRET_MASTER')!;
      expect(master.valueFrom!.secretKeyRef!.name).toBeTruthy();
      // A Secret is rendered only when the values ask for one (the demo), and then holds a generated token.
      const asked = /^\s*create: true/m.test(readFileSync(file, 'utf8'));
      expect([...secretNames]).toEqual(asked ? ['mbp-mcp-bearer-proxy'] : []);
      for (const secret of objects.filter((o) => o.kind === 'Secret'))
        expect(Object.values(secret.data!).map((v) => Buffer.from(v, 'base64').toString())).toEqual([
          expect.stringMatching(/^[0-9a-f]{64}$/),
        ]);
      const config = parseYaml(one(objects, 'ConfigMap').data!['config.yaml']!) as Record<string, unknown>;
      const secretKeys = keysOf(CONFIG_KEYS).flatMap(([key, spec]) => (spec.doc.secret ? [key] : []));
      const flat = JSON.stringify(config);
      for (const key of secretKeys) expect(flat).not.toContain(`"${key.split('.').at(-1)}"`);
      // Nothing shaped like a token or key (64 hex) in any object but the demo's Secret (the config's
      // checksum annotation is one, by design).
      for (const o of objects.filter((x) => x.kind !== 'Secret')) {
        const copy = structuredClone(o) as any;
        if (copy.kind === 'Deployment') delete copy.spec.template.metadata.annotations['checksum/config'];
        expect(JSON.stringify(copy)).not.toMatch(/[0-9a-f]{64}/);
      }
    });

    it('waits longer than the drain before killing the pod, and sizes WORKERS from the CPU limit', () => {
      const pod = podSpec(objects);
      const sidecar = sidecarContainer(objects);
      const config = parseYaml(one(objects, 'ConfigMap').data!['config.yaml']!) as { proxy: { shutdownGraceMs: number } };
      const preStop = (pod.containers as Container[])
        .filter((c) => c.name !== SIDECAR)
        .map((c) => c.lifecycle?.preStop?.sleep?.seconds ?? 0);
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(config.proxy.shutdownGraceMs / 1000 + Math.max(0, ...preStop));
      const workers = envOf(sidecar, 'WORKERS')!;
      if (sidecar.resources?.limits?.cpu) expect(workers.valueFrom).toEqual({ resourceFieldRef: { resource: 'limits.cpu', divisor: '1' } });
      else expect(workers.value).toBe('1');
    });

    it('is a configuration the sidecar itself accepts (--check-config on the rendered environment and config file)', async () => {
      const configDir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-check-'));
      try {
        for (const [name, content] of Object.entries(one(objects, 'ConfigMap').data!)) writeFileSync(join(configDir, name), content);
        const pod: Pod = { objects, configDir, secrets: TEST_SECRETS };
        const { argv, env } = containerProcess(pod, sidecarContainer(objects));
        const check = spawnProcess([...argv, '--check-config', '--skip-network-checks'], env);
        expect(await check.exit, check.output()).toBe(0);
      } finally {
        rmSync(configDir, { recursive: true, force: true });
      }
    });

    it('is the shape its mode names', () => {
      const values = parseYaml(readFileSync(file, 'utf8')) as { mode: string; mcpServer?: { port?: number } };
      const pod = podSpec(objects);
      const sidecar = sidecarContainer(objects);
      if (values.mode === 'sidecar') {
        // A native sidecar: an init container that runs for the pod's life, the MCP server on loopback.
        expect(pod.initContainers.map((c: Container) => [c.name, c.restartPolicy])).toEqual([[SIDECAR, 'Always']]);
        expect(pod.containers).toHaveLength(1);
        expect(pod.containers[0].ports).toBeUndefined();
        expect(envOf(sidecar, 'UPSTREAM_URL')!.value).toBe(`http://127.0.0.1:${values.mcpServer?.port ?? 3000}/mcp`);
      } else {
        expect(pod.initContainers).toBeUndefined();
        expect(pod.containers.map((c: Container) => c.name)).toEqual([SIDECAR]);
        expect(new URL(envOf(sidecar, 'UPSTREAM_URL')!.value!).hostname).not.toBe('127.0.0.1');
      }
      const budget = objects.find((o) => o.kind === 'PodDisruptionBudget');
      const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler');
      if (hpa) expect(one(objects, 'Deployment').spec.replicas).toBeUndefined();
      if (budget) expect(budget.spec.selector).toEqual(one(objects, 'Deployment').spec.selector);
    });

    it("runs migrate, when enabled, as a hook Job before install and upgrade: the sidecar's image, environment, Secret and security context", () => {
      const values = parseYaml(readFileSync(file, 'utf8')) as { migrate?: { enabled?: boolean } };
      const hooks = migrateHooks(objects);
      if (!values.migrate?.enabled) {
        expect(hooks).toBeUndefined();
        return;
      }
      const { job, config } = hooks!;
      const annotations = (o: Obj) => o.metadata.annotations!;
      for (const hook of [job, config]) {
        expect(annotations(hook)['helm.sh/hook']).toBe('pre-install,pre-upgrade');
        expect(annotations(hook)['helm.sh/hook-delete-policy']).toBe('before-hook-creation,hook-succeeded');
      }
      // The ConfigMap is created first: hooks run in the order of their weights.
      expect(Number(annotations(config)['helm.sh/hook-weight'])).toBeLessThan(Number(annotations(job)['helm.sh/hook-weight']));
      expect(config.data).toEqual(one(objects, 'ConfigMap').data);
      expect(job.spec.backoffLimit).toBeGreaterThanOrEqual(0);
      // Within Helm's default --timeout (5 minutes), which it waits for a hook.
      expect(job.spec.activeDeadlineSeconds).toBeGreaterThan(0);
      expect(job.spec.activeDeadlineSeconds).toBeLessThan(300);
      const pod = job.spec.template.spec;
      expect(pod.restartPolicy).toBe('Never');
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.securityContext).toEqual(podSpec(objects).securityContext);
      expect(pod.containers).toHaveLength(1);
      const [migrate] = pod.containers as Container[];
      const sidecar = sidecarContainer(objects);
      expect(migrate!.image).toBe(sidecar.image);
      expect(migrate!.command).toEqual([...imageCmd(), 'migrate']);
      // The same environment, secrets by reference included, and the same security context.
      expect(migrate!.env).toEqual(sidecar.env);
      expect(migrate!.securityContext).toEqual(sidecar.securityContext);
      expect(migrate!.securityContext).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
      expect(migrate!.volumeMounts).toEqual(sidecar.volumeMounts);
      expect(pod.volumes).toEqual([{ name: 'config', configMap: { name: config.metadata.name } }]);
      // Nothing of the chart selects its pod: no Service sends it traffic, no budget or policy counts it.
      const labels = job.spec.template.metadata.labels as Record<string, string>;
      const selects = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
      for (const o of objects.filter((x) => !isHook(x))) {
        const selector = o.kind === 'Service' ? o.spec.selector : (o.spec?.selector?.matchLabels ?? o.spec?.podSelector?.matchLabels);
        if (selector && Object.keys(selector).length > 0) expect(selects(selector), `${o.kind}/${o.metadata.name}`).toBe(false);
      }
    });
  });

  it('the unknown-field check catches a misspelled field that helm lint, helm template and kubernetes-models all let through', async () => {
    // A typo in a values file goes through toYaml into the probe; lint and template pass.
    const set = ['probes.liveness.periodSecond=10'];
    const lint = helm.run(['lint', '--strict', CHART, '-f', `${EXAMPLES}/gateway.yaml`, '--set', set[0]!]);
    expect(lint.status).toBe(0);
    const objects = render([`${EXAMPLES}/gateway.yaml`], set);
    const deployment = one(objects, 'Deployment');
    expect(await modelValidates(deployment)).toBe(true);
    expect(await schemaProblems(objects)).toEqual({
      'Deployment/mbp-mcp-bearer-proxy': ['unknown field spec.template.spec.containers[0].livenessProbe.periodSecond'],
    });
    // And a hand-made one deeper in a list, beside a type error the package's own validator reports.
    const broken = structuredClone(deployment) as any;
    broken.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem = true;
    broken.spec.template.spec.containers[0].ports[1].protocl = 'TCP';
    expect((await kubeProblems(broken)).sort()).toEqual([
      'unknown field spec.template.spec.containers[0].livenessProbe.periodSecond',
      'unknown field spec.template.spec.containers[0].ports[1].protocl',
      'unknown field spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem',
    ]);
    broken.spec.replicas = 'three';
    expect((await kubeProblems(broken))[0]).toMatch(/replicas must be integer/);
    // The PodMonitor's looser check refuses unknown fields too.
    const monitor = one(render([`${EXAMPLES}/gateway-autoscaling-metrics.yaml`]), 'PodMonitor');
    monitor.spec.podMetricsEndpoints[0].scrapeIntervall = '10s';
    expect(checkPodMonitor(monitor)).toBe(false);
  });

  it.each([
    ['no Secret named', { mode: 'gateway', publicUrl: 'https://x.example', upstream: { service: 's' } }, /secrets.existingSecret/],
    [
      'a chart-managed variable in env',
      {
        mode: 'gateway',
        publicUrl: 'https://x.example',
        upstream: { service: 's' },
        secrets: { existingSecret: 's' },
        env: { ADMIN_HOST: '0.0.0.0' },
      },
      /env.ADMIN_HOST is set by the chart/,
    ],
    [
      'a PodMonitor with the admin listener on loopback',
      {
        mode: 'gateway',
        publicUrl: 'https://x.example',
        upstream: { service: 's' },
        secrets: { existingSecret: 's' },
        probes: { mode: 'exec' },
        metrics: { podMonitor: { enabled: true } },
      },
      /podMonitor needs probes.mode httpGet/,
    ],
    [
      'a termination grace within the drain',
      {
        mode: 'gateway',
        publicUrl: 'https://x.example',
        upstream: { service: 's' },
        secrets: { existingSecret: 's' },
        terminationGracePeriodSeconds: 10,
      },
      /terminationGracePeriodSeconds must be above 10 s/,
    ],
    [
      'the sidecar shape without an MCP server',
      { mode: 'sidecar', publicUrl: 'https://x.example', secrets: { existingSecret: 's' } },
      /mcpServer.container/,
    ],
    ['no public URL', { mode: 'gateway', upstream: { service: 's' }, secrets: { existingSecret: 's' } }, /publicUrl/],
    [
      'the migrate Job with a Secret the chart would make only after it',
      {
        mode: 'gateway',
        publicUrl: 'https://x.example',
        upstream: { service: 's' },
        secrets: { create: true },
        redis: { topology: 'standalone', tls: false, hosts: ['redis:6379'] },
        migrate: { enabled: true },
      },
      /migrate.enabled: the Job runs before the chart's objects exist/,
    ],
  ])('refuses %s', (_what, values, message) => {
    expect(renderError(values)).toMatch(message);
  });
});

// ── The rendered pod as local processes ────────────────────────────────────────────────────────────

/** The CMD of a Dockerfile stage (`example-upstream`), or of the last stage (the sidecar image). */
function imageCmd(stage?: string): string[] {
  const lines = readFileSync('Dockerfile', 'utf8').split('\n');
  let current = '';
  let cmd: string[] | undefined;
  for (const line of lines) {
    const from = /^FROM \S+(?: AS (\S+))?/.exec(line);
    if (from) current = from[1] ?? '';
    if (line.startsWith('CMD ') && (stage === undefined || current === stage)) cmd = JSON.parse(line.slice(4)) as string[];
  }
  expect(cmd, `Dockerfile CMD of ${stage ?? 'the last stage'}`).toBeDefined();
  return cmd!;
}

/** A Kubernetes CPU quantity in cores, rounded up as the kubelet does for a resourceFieldRef with divisor 1. */
function ceilCores(quantity: string): number {
  const millis = quantity.endsWith('m') ? Number(quantity.slice(0, -1)) : Number(quantity) * 1000;
  expect(Number.isFinite(millis)).toBe(true);
  return Math.ceil(millis / 1000);
}

interface Pod {
  objects: Obj[];
  secrets: Record<string, string>;
  /** The directory the ConfigMap's files are written to, standing for the volume's mount path. */
  configDir: string;
}

/** What the kubelet would run for this container: argv (node is this test's) and environment. */
function containerProcess(pod: Pod, container: Container, stage?: string): { argv: string[]; env: NodeJS.ProcessEnv } {
  const argv = container.command ?? imageCmd(stage);
  expect(argv[0]).toBe('node');
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: pod.configDir };
  const mounts = container.volumeMounts ?? [];
  for (const variable of container.env ?? []) {
    let value: string;
    if (variable.value !== undefined) {
      // $(VAR) names a variable defined before it, as the kubelet expands it.
      value = variable.value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);
    } else if (variable.valueFrom?.secretKeyRef) {
      const key = variable.valueFrom.secretKeyRef.key;
      expect(pod.secrets, `the test's Secret has ${key}`).toHaveProperty(key);
      value = pod.secrets[key]!;
    } else if (variable.valueFrom?.resourceFieldRef) {
      expect(variable.valueFrom.resourceFieldRef).toEqual({ resource: 'limits.cpu', divisor: '1' });
      value = String(ceilCores(container.resources!.limits!.cpu!));
    } else throw new Error(`unsupported env source for ${variable.name}`);
    // The config volume is a local directory here.
    for (const mount of mounts) if (value.startsWith(`${mount.mountPath}/`)) value = pod.configDir + value.slice(mount.mountPath.length);
    env[variable.name] = value;
  }
  return { argv: [process.execPath, ...RUN_TS, ...argv.slice(1)], env };
}

/** Asks a probe as the kubelet does: HTTP GET to the port on the pod's address (here 127.0.0.1), or the command in the container. */
async function askProbe(container: Container, env: NodeJS.ProcessEnv, probe: Probe): Promise<boolean> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
  if (probe.httpGet) {
    const port = portNumber(container, probe.httpGet.port);
    const response = await fetch(`http://127.0.0.1:${port}${probe.httpGet.path}`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.arrayBuffer();
    return response.status >= 200 && response.status < 400;
  }
  const [command, ...args] = probe.exec!.command;
  expect(command).toBe('node');
  const child = spawn(process.execPath, args, { env, stdio: 'ignore', timeout: timeoutMs });
  const [code] = (await once(child, 'exit')) as [number | null];
  return code === 0;
}

async function askAllProbes(container: Container, env: NodeJS.ProcessEnv): Promise<void> {
  for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe])
    expect(await askProbe(container, env, probe!)).toBe(true);
}

/** The sidecar process of the rendered pod, started and seen listening on both ports. */
async function startSidecar(pod: Pod): Promise<{ started: Started; container: Container; env: NodeJS.ProcessEnv }> {
  const container = sidecarContainer(pod.objects);
  const { argv, env } = containerProcess(pod, container);
  const started = spawnProcess(argv, env);
  await started.waitFor((out) => /proxy listening on/.test(out) && /admin listening on/.test(out));
  return { started, container, env };
}

async function initializeThrough(proxyPort: number, token: string): Promise<string | undefined> {
  const client = new Client({ name: 'helm-chart-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxyPort}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const name = client.getServerVersion()?.name;
  await client.close();
  return name;
}

async function stop(started: Started): Promise<number | null> {
  started.child.kill('SIGTERM');
  return started.exit;
}

describe('the rendered pod, run as local processes', () => {
  let redis: RedisServer;
  let dir: string;
  const master = generateToken();

  beforeAll(async () => {
    redis = await startRedisServer();
    dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-pod-'));
  });
  afterAll(async () => {
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Renders an example with free ports and extra values, writes its ConfigMap's files, fills its Secret. */
  async function renderPod(example: string, values: (v: any, ports: { proxy: number; admin: number }) => void): Promise<Pod> {
    const ports = { proxy: await freePort(), admin: await freePort() };
    const v = parseYaml(readFileSync(`${EXAMPLES}/${example}`, 'utf8')) as any;
    v.ports = ports;
    // Clients reach it here at this address, not through an ingress with the example's host name.
    v.publicUrl = `http://127.0.0.1:${ports.proxy}`;
    values(v, ports);
    const file = join(dir, `values-${example}`);
    writeFileSync(file, stringify(v));
    const objects = render([file]);
    const configDir = mkdtempSync(join(dir, 'config-'));
    for (const [name, content] of Object.entries(one(objects, 'ConfigMap').data!)) writeFileSync(join(configDir, name), content);
    return { objects, configDir, secrets: { BEARER_SECRET_MASTER: master, REDIS_URL: redis.url } };
  }

  it('sidecar shape: the sidecar starts first and passes its probes; the MCP server beside it is reached on loopback', async () => {
    const upstreamPort = await freePort();
    const pod = await renderPod('sidecar.yaml', (v) => {
      v.mcpServer.port = upstreamPort;
      v.mcpServer.container.env = v.mcpServer.container.env.map((e: EnvVar) =>
        e.name === 'UPSTREAM_PORT' ? { ...e, value: String(upstreamPort) } : e,
      );
    });
    // A native sidecar's startup probe passes before the pod's containers start.
    const sidecar = await startSidecar(pod);
    let server: Started | undefined;
    try {
      expect(sidecar.env.WORKERS).toBe('1');
      expect(await askProbe(sidecar.container, sidecar.env, sidecar.container.startupProbe!)).toBe(true);
      const [mcpServer] = podSpec(pod.objects).containers as Container[];
      expect(mcpServer!.image).toMatch(/example-upstream/);
      const { argv, env } = containerProcess(pod, mcpServer!, 'example-upstream');
      server = spawnProcess(argv, env);
      await server.waitFor((out) => out.includes(`upstream listening on http://127.0.0.1:${upstreamPort}/mcp`));
      await askAllProbes(sidecar.container, sidecar.env);
      expect(await initializeThrough(Number(sidecar.env.PORT), master)).toBeTruthy();
    } finally {
      // Kubernetes stops the pod's containers first, then its native sidecars.
      if (server) await stop(server);
      expect(await stop(sidecar.started), sidecar.started.output()).toBe(0);
    }
  });

  it('gateway shape: two workers from a 2-CPU limit, probes answered, requests forwarded to the Service', async () => {
    const upstream: RunningUpstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    try {
      const pod = await renderPod('gateway-autoscaling-metrics.yaml', (v) => {
        v.upstream.url = upstream.url;
      });
      const sidecar = await startSidecar(pod);
      try {
        expect(sidecar.env.WORKERS).toBe('2');
        expect(sidecar.env.ADMIN_HOST).toBe('0.0.0.0');
        await askAllProbes(sidecar.container, sidecar.env);
        expect(await initializeThrough(Number(sidecar.env.PORT), master)).toBeTruthy();
      } finally {
        expect(await stop(sidecar.started), sidecar.started.output()).toBe(0);
      }
    } finally {
      await upstream.close();
    }
  });

  it("migrate Job: the sidecar refuses a store of layout 1 (exit 2); the Job's container brings it over, then the sidecar serves its tokens", async () => {
    const code = layoutOneCode();
    const upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    try {
      // A prefix of its own: the other pods of this file share the Redis and must find it of the current layout.
      const prefix = `helm-migrate-${generateToken().slice(0, 8)}:`;
      const pod = await renderPod('migrate.yaml', (v) => {
        v.upstream.url = upstream.url;
        v.config.redis.keyPrefix = prefix;
      });
      const written = await code.write(redis.url, prefix, 2, 1);
      const sidecar = containerProcess(pod, sidecarContainer(pod.objects));
      const refused = spawnProcess(sidecar.argv, sidecar.env);
      expect(await refused.exit, refused.output()).toBe(2);
      expect(refused.output()).toContain('mcp-bearer-proxy migrate');

      // The Job's pod, its config volume being the hook's ConfigMap.
      const { job, config } = migrateHooks(pod.objects)!;
      const jobConfigDir = mkdtempSync(join(dir, 'migrate-config-'));
      for (const [name, content] of Object.entries(config.data!)) writeFileSync(join(jobConfigDir, name), content);
      const container = job.spec.template.spec.containers[0] as Container;
      const { argv, env } = containerProcess({ ...pod, configDir: jobConfigDir }, container);
      const migrate = spawnProcess(argv, env);
      expect(await migrate.exit, migrate.output()).toBe(0);
      expect(migrate.output()).toMatch(/moved [1-9]\d* records to layout 2/);

      const started = await startSidecar(pod);
      try {
        const token = written.find((t) => t.kind === 'access' && !t.revoked)!;
        expect(await initializeThrough(Number(started.env.PORT), token.raw)).toBeTruthy();
      } finally {
        expect(await stop(started.started), started.started.output()).toBe(0);
      }
    } finally {
      await upstream.close();
      code.cleanup();
    }
  });

  it('exec probes: the admin listener stays on loopback and the probe commands pass inside the container', async () => {
    let sidecar: Awaited<ReturnType<typeof startSidecar>>;
    const upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    try {
      const pod = await renderPod('exec-probes.yaml', (v) => {
        v.upstream.url = upstream.url;
      });
      sidecar = await startSidecar(pod);
      try {
        expect(sidecar.env.ADMIN_HOST).toBe('127.0.0.1');
        expect(sidecar.started.output()).toContain(`admin listening on http://127.0.0.1:${sidecar.env.ADMIN_PORT}`);
        await askAllProbes(sidecar.container, sidecar.env);
      } finally {
        expect(await stop(sidecar.started), sidecar.started.output()).toBe(0);
      }
      // With the sidecar gone, the same probe commands fail: they do ask it.
      expect(await askProbe(sidecar.container, sidecar.env, sidecar.container.livenessProbe!)).toBe(false);
    } finally {
      await upstream.close();
    }
  });
});
