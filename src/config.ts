// Start-up configuration: load YAML -> interpolate ${VAR} / ${VAR:-default} -> apply the
// environment overrides -> validate everything at once -> freeze. Nothing is built from a config that
// has a single problem; every problem is reported together.

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { isTokenShaped } from './credentials.ts';
import { parseRedisUrl } from './store/redis.ts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
/** `auto`: human-readable lines when stdout is a terminal, JSON lines otherwise. */
export type LogFormat = 'auto' | 'json' | 'pretty';

const DEFAULT_IDP_ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];
const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
export type StoreKind = 'redis' | 'memory';

export interface Config {
  readonly masterToken: string;
  readonly store: StoreKind;
  readonly redis: {
    readonly url: string;
    readonly keyPrefix: string;
    readonly commandTimeoutMs: number;
    readonly connectTimeoutMs: number;
  };
  readonly upstream: {
    readonly url: string;
    /** Bound on waiting for the upstream's response headers (504 past it); streams are never cut. */
    readonly headersTimeoutMs: number;
    readonly healthTimeoutMs: number;
    readonly maxSockets: number;
  };
  readonly proxy: {
    readonly host: string;
    readonly port: number;
    /** Externally visible base URL; undefined means http://localhost:<bound port>. */
    readonly publicUrl: string | undefined;
    readonly trustedProxies: readonly string[];
    /** 0 = no cap: /mcp bodies are streamed, never buffered. */
    readonly maxBodyBytes: number;
    readonly maxHeaderBytes: number;
    /** Time allowed to receive a request's headers (slowloris bound). */
    readonly headersTimeoutMs: number;
    /** Time allowed to receive a whole request body; does not apply to responses (SSE). */
    readonly requestTimeoutMs: number;
    readonly shutdownGraceMs: number;
  };
  readonly admin: {
    readonly host: string;
    readonly port: number;
    readonly maxBodyBytes: number;
  };
  readonly idp: {
    readonly issuer: string | undefined;
    readonly audience: string | undefined;
    readonly jwksUrl: string | undefined;
    /** JWS algorithms accepted from the IdP (pinned; `none` and HMAC are never accepted). */
    readonly algorithms: readonly string[];
    readonly clockToleranceSeconds: number;
    readonly jwksTimeoutMs: number;
    /** Minimum time between two JWKS fetches caused by an unknown `kid`. */
    readonly jwksCooldownMs: number;
    /** When set, the JWT's `email` claim must end in one of these domains (and `email_verified` must not be false). */
    readonly allowedEmailDomains: readonly string[];
    /** When set, the JWT's `groupsClaim` (a string list) must contain this group. */
    readonly requiredGroup: string | undefined;
    readonly groupsClaim: string;
  };
  readonly rateLimits: {
    /** Failed authentications per client address per minute, counted across replicas in the store (0: off). */
    readonly failedAuthPerMinute: number;
    /** Token-endpoint requests per client_id per minute (0: off). */
    readonly tokenRequestsPerMinute: number;
  };
  readonly oauth: {
    /** `open` (RFC 7591 without credentials, what MCP clients expect) or `protected` (master token). */
    readonly registration: 'open' | 'protected';
    /** Registrations per client IP per minute on POST /register. */
    readonly registrationRateLimitPerMinute: number;
    /** A dynamically registered client that requests no token for this long is forgotten. */
    readonly unusedClientTtlSeconds: number;
    /** `client_id` as an https URL naming the client's own metadata document (src/oauth/cimd.ts). */
    readonly clientMetadataDocuments: {
      readonly enabled: boolean;
      readonly timeoutMs: number;
      readonly maxBytes: number;
      readonly cacheTtlSeconds: number;
      readonly cacheMaxEntries: number;
      /** UNSAFE outside tests: documents from loopback, private and other internal addresses. */
      readonly allowPrivateAddresses: boolean;
    };
  };
  readonly audit: {
    /** Also append audit events to a capped Redis stream (`<keyPrefix>audit`), readable by `listAuditEvents`. */
    readonly stream: boolean;
    /** Approximate cap of that stream (`XADD ... MAXLEN ~ maxLen`). */
    readonly maxLen: number;
  };
  readonly logLevel: LogLevel;
  readonly logFormat: LogFormat;
}

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Replaces ${VAR} and ${VAR:-default} in every string of a parsed YAML tree. Unset ${VAR} -> "". */
export function interpolate(value: unknown, env: NodeJS.ProcessEnv): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_, name: string, fallback?: string) => {
      const v = env[name];
      return v !== undefined && v !== '' ? v : (fallback ?? '');
    });
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env);
    return out;
  }
  return value;
}

type Tree = Record<string, unknown>;

function section(root: Tree, name: string, problems: string[]): Tree {
  const v = root[name];
  if (v === undefined || v === null) return {};
  if (typeof v === 'object' && !Array.isArray(v)) return v as Tree;
  problems.push(`"${name}" must be a mapping`);
  return {};
}

/** Environment variables that always win over the file (README, Configuration): [section, key, variable]. */
export const ENV_OVERRIDES: ReadonlyArray<readonly [section: string | null, key: string, variable: string]> = [
  [null, 'masterToken', 'BEARER_SECRET_MASTER'],
  ['redis', 'url', 'REDIS_URL'],
  ['upstream', 'url', 'UPSTREAM_URL'],
  ['proxy', 'host', 'HOST'],
  ['proxy', 'port', 'PORT'],
  ['proxy', 'publicUrl', 'PUBLIC_URL'],
  ['admin', 'host', 'ADMIN_HOST'],
  ['admin', 'port', 'ADMIN_PORT'],
  ['idp', 'issuer', 'IDP_ISSUER'],
  ['idp', 'audience', 'IDP_AUDIENCE'],
  ['idp', 'jwksUrl', 'IDP_JWKS_URL'],
  [null, 'logLevel', 'LOG_LEVEL'],
  [null, 'logFormat', 'LOG_FORMAT'],
];

function applyEnv(root: Tree, env: NodeJS.ProcessEnv, problems: string[]): void {
  for (const [sectionName, key, variable] of ENV_OVERRIDES) {
    const v = env[variable];
    if (v === undefined || v === '') continue;
    if (sectionName === null) {
      root[key] = v;
      continue;
    }
    // A copy: the caller's parsed tree is never modified (root itself is a shallow copy).
    const s = { ...section(root, sectionName, problems) };
    s[key] = v;
    root[sectionName] = s;
  }
}

/** One key as buildConfig reads it (type, range, default): what src/config-doc.ts turns into the README table. */
export interface ConfigKeyInfo {
  key: string;
  type: string;
  /** The value used when the key is absent; undefined: none (unset). */
  default: unknown;
}

/** Set only while describeConfigKeys() runs buildConfig: every Reader call is recorded here. */
let recording: ConfigKeyInfo[] | undefined;

class Reader {
  constructor(
    private readonly tree: Tree,
    private readonly path: string,
    private readonly problems: string[],
  ) {}

  #name(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  #record(key: string, type: string, fallback: unknown): void {
    recording?.push({ key: this.#name(key), type, default: fallback });
  }

  string(key: string, fallback: string): string {
    this.#record(key, 'string', fallback === '' ? undefined : fallback);
    return this.#string(key, fallback);
  }

  #string(key: string, fallback: string): string {
    const v = this.tree[key];
    if (v === undefined || v === null || v === '') return fallback;
    if (typeof v === 'string' || typeof v === 'number') return String(v);
    this.problems.push(`${this.#name(key)} must be a string`);
    return fallback;
  }

  optionalString(key: string): string | undefined {
    this.#record(key, 'string', undefined);
    const v = this.#string(key, '');
    return v === '' ? undefined : v;
  }

  /** One of `allowed`; `label` names the key in the problem (e.g. the environment variable). */
  oneOf<T extends string>(key: string, fallback: T, allowed: readonly T[], label = this.#name(key)): T {
    this.#record(key, allowed.map((a) => `\`${a}\``).join(', '), fallback);
    const v = this.#string(key, fallback);
    if ((allowed as readonly string[]).includes(v)) return v as T;
    this.problems.push(`${label} must be ${allowed.length === 2 ? `"${allowed[0]}" or "${allowed[1]}"` : `one of ${allowed.join(', ')}`} (got "${v}")`);
    return fallback;
  }

  bool(key: string, fallback: boolean): boolean {
    this.#record(key, 'boolean', fallback);
    const v = this.tree[key];
    if (v === undefined || v === null || v === '') return fallback;
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    this.problems.push(`${this.#name(key)} must be true or false (got ${JSON.stringify(v)})`);
    return fallback;
  }

  int(key: string, fallback: number, min: number, max: number): number {
    this.#record(key, max === Number.MAX_SAFE_INTEGER ? `integer >= ${min}` : `integer ${min}..${max}`, fallback);
    const v = this.tree[key];
    if (v === undefined || v === null || v === '') return fallback;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : NaN;
    if (!Number.isInteger(n) || n < min || n > max) {
      this.problems.push(`${this.#name(key)} must be an integer from ${min} to ${max} (got ${JSON.stringify(v)})`);
      return fallback;
    }
    return n;
  }

  stringList(key: string, fallback: string[] = []): string[] {
    this.#record(key, 'list of strings', fallback);
    const v = this.tree[key];
    if (v === undefined || v === null || v === '') return [...fallback];
    if (typeof v === 'string') return v.split(',').map((s) => s.trim()).filter(Boolean);
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
    this.problems.push(`${this.#name(key)} must be a list of strings`);
    return [];
  }
}

function checkHttpUrl(name: string, value: string, problems: string[], requirePath = false): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${name} "${value}" is not a valid URL (example: http://127.0.0.1:3000/mcp)`);
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`${name} must be an http:// or https:// URL (got ${url.protocol})`);
  } else if (requirePath && (url.pathname === '' || url.pathname === '/')) {
    problems.push(`${name} must name the MCP endpoint path, e.g. http://127.0.0.1:3000/mcp`);
  }
  if (url.username || url.password) problems.push(`${name} must not carry credentials`);
}

function checkCidr(entry: string): boolean {
  const [address, bits] = entry.split('/');
  const family = isIP(address ?? '');
  if (family === 0) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d+$/.test(bits) && n >= 0 && n <= (family === 4 ? 32 : 128);
}

/** Validates a parsed config tree (after interpolation); throws ConfigError listing every problem. */
export function buildConfig(input: unknown, env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const root: Tree = input !== null && typeof input === 'object' && !Array.isArray(input) ? { ...(input as Tree) } : {};
  if (input !== null && input !== undefined && root !== input && typeof input !== 'object') {
    problems.push('the config file must contain a YAML mapping');
  }
  applyEnv(root, env, problems);
  const top = new Reader(root, '', problems);
  const redisR = new Reader(section(root, 'redis', problems), 'redis', problems);
  const upstreamR = new Reader(section(root, 'upstream', problems), 'upstream', problems);
  const proxyR = new Reader(section(root, 'proxy', problems), 'proxy', problems);
  const adminR = new Reader(section(root, 'admin', problems), 'admin', problems);
  const idpR = new Reader(section(root, 'idp', problems), 'idp', problems);

  const masterToken = top.string('masterToken', '');
  if (masterToken === '') {
    problems.push(
      'BEARER_SECRET_MASTER is not set. Generate one with `node -e "console.log(require(\'crypto\').randomBytes(32).toString(\'hex\'))"` and export it',
    );
  } else if (!isTokenShaped(masterToken)) {
    problems.push(
      `BEARER_SECRET_MASTER must be exactly 64 lowercase hex characters (32 random bytes); the value given has ${masterToken.length} characters${/[A-F]/.test(masterToken) ? ' and uppercase letters' : ''}`,
    );
  }

  const store = top.oneOf<StoreKind>('store', 'redis', ['redis', 'memory']);

  const redisUrl = redisR.string('url', 'redis://127.0.0.1:6379');
  try {
    parseRedisUrl(redisUrl);
  } catch (err) {
    problems.push(`REDIS_URL "${redisUrl.replace(/\/\/[^@/]*@/, '//***@')}": ${(err as Error).message}`);
  }

  const upstreamUrl = upstreamR.string('url', 'http://127.0.0.1:3000/mcp');
  checkHttpUrl('UPSTREAM_URL', upstreamUrl, problems, true);

  const proxyPort = proxyR.int('port', 8080, 0, 65535);
  const publicUrl = proxyR.optionalString('publicUrl');
  if (publicUrl !== undefined) checkHttpUrl('PUBLIC_URL', publicUrl, problems);

  const trustedProxies = proxyR.stringList('trustedProxies');
  for (const entry of trustedProxies) {
    if (!checkCidr(entry)) problems.push(`proxy.trustedProxies entry "${entry}" is not an IP address or CIDR`);
  }

  const logLevel = top.oneOf<LogLevel>('logLevel', 'info', ['debug', 'info', 'warn', 'error'], 'LOG_LEVEL');
  const logFormat = top.oneOf<LogFormat>('logFormat', 'auto', ['auto', 'json', 'pretty'], 'LOG_FORMAT');

  const algorithms = idpR.stringList('algorithms', DEFAULT_IDP_ALGORITHMS);
  const idp = {
    issuer: idpR.optionalString('issuer'),
    audience: idpR.optionalString('audience'),
    jwksUrl: idpR.optionalString('jwksUrl'),
    algorithms: algorithms.length > 0 ? algorithms : [...DEFAULT_IDP_ALGORITHMS],
    clockToleranceSeconds: idpR.int('clockToleranceSeconds', 30, 0, 300),
    jwksTimeoutMs: idpR.int('jwksTimeoutMs', 5000, 100, 60000),
    jwksCooldownMs: idpR.int('jwksCooldownMs', 30000, 0, 3600000),
    allowedEmailDomains: idpR.stringList('allowedEmailDomains').map((d) => d.toLowerCase()),
    requiredGroup: idpR.optionalString('requiredGroup'),
    groupsClaim: idpR.string('groupsClaim', 'groups'),
  };
  for (const alg of idp.algorithms) {
    if (!ASYMMETRIC_ALGORITHMS.includes(alg)) {
      problems.push(`idp.algorithms: "${alg}" is not allowed (use asymmetric algorithms: ${ASYMMETRIC_ALGORITHMS.join(', ')})`);
    }
  }
  const limitsR = new Reader(section(root, 'rateLimits', problems), 'rateLimits', problems);
  const rateLimits = {
    failedAuthPerMinute: limitsR.int('failedAuthPerMinute', 120, 0, 1_000_000),
    tokenRequestsPerMinute: limitsR.int('tokenRequestsPerMinute', 60, 0, 1_000_000),
  };
  const oauthTree = section(root, 'oauth', problems);
  const oauthR = new Reader(oauthTree, 'oauth', problems);
  const registration = oauthR.oneOf('registration', 'open', ['open', 'protected']);
  const cimdR = new Reader(section(oauthTree, 'clientMetadataDocuments', problems), 'oauth.clientMetadataDocuments', problems);
  const oauth = {
    registration: registration === 'protected' ? ('protected' as const) : ('open' as const),
    registrationRateLimitPerMinute: oauthR.int('registrationRateLimitPerMinute', 10, 1, 100000),
    unusedClientTtlSeconds: oauthR.int('unusedClientTtlSeconds', 30 * 24 * 3600, 60, 10 * 365 * 24 * 3600),
    clientMetadataDocuments: {
      enabled: cimdR.bool('enabled', true),
      timeoutMs: cimdR.int('timeoutMs', 5000, 100, 60000),
      maxBytes: cimdR.int('maxBytes', 5120, 512, 1048576),
      cacheTtlSeconds: cimdR.int('cacheTtlSeconds', 600, 0, 86400),
      cacheMaxEntries: cimdR.int('cacheMaxEntries', 1000, 0, 1_000_000),
      allowPrivateAddresses: cimdR.bool('allowPrivateAddresses', false),
    },
  };
  const auditR = new Reader(section(root, 'audit', problems), 'audit', problems);
  const audit = {
    stream: auditR.bool('stream', true),
    maxLen: auditR.int('maxLen', 10000, 100, 10_000_000),
  };
  const idpSet = [idp.issuer, idp.audience, idp.jwksUrl].filter((v) => v !== undefined).length;
  if (idpSet > 0 && idpSet < 3) problems.push('IDP_ISSUER, IDP_AUDIENCE and IDP_JWKS_URL must be set together (or none of them)');
  if (idp.jwksUrl !== undefined) checkHttpUrl('IDP_JWKS_URL', idp.jwksUrl, problems);

  const config: Config = {
    masterToken,
    store: store === 'memory' ? 'memory' : 'redis',
    redis: {
      url: redisUrl,
      keyPrefix: redisR.string('keyPrefix', 'mcpauth:'),
      commandTimeoutMs: redisR.int('commandTimeoutMs', 1000, 10, 1500),
      connectTimeoutMs: redisR.int('connectTimeoutMs', 5000, 100, 60000),
    },
    upstream: {
      url: upstreamUrl,
      headersTimeoutMs: upstreamR.int('headersTimeoutMs', 60000, 10, 3600000),
      healthTimeoutMs: upstreamR.int('healthTimeoutMs', 2000, 10, 60000),
      maxSockets: upstreamR.int('maxSockets', 1024, 1, 65536),
    },
    proxy: {
      host: proxyR.string('host', '0.0.0.0'),
      port: proxyPort,
      publicUrl: publicUrl?.replace(/\/+$/, ''),
      trustedProxies,
      maxBodyBytes: proxyR.int('maxBodyBytes', 0, 0, Number.MAX_SAFE_INTEGER),
      maxHeaderBytes: proxyR.int('maxHeaderBytes', 16384, 1024, 1048576),
      headersTimeoutMs: proxyR.int('headersTimeoutMs', 10000, 100, 600000),
      requestTimeoutMs: proxyR.int('requestTimeoutMs', 300000, 0, 86400000),
      shutdownGraceMs: proxyR.int('shutdownGraceMs', 10000, 0, 600000),
    },
    admin: {
      host: adminR.string('host', '127.0.0.1'),
      port: adminR.int('port', 8081, 0, 65535),
      maxBodyBytes: adminR.int('maxBodyBytes', 65536, 1024, 1048576),
    },
    idp,
    rateLimits,
    oauth,
    audit,
    logLevel,
    logFormat,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** Reads and validates the file; a missing or unparsable file is one more problem in the same list. */
export function loadConfig(path: string | undefined, env: NodeJS.ProcessEnv = process.env): Config {
  let tree: unknown = {};
  if (path !== undefined) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError([`cannot read config file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`]);
    }
    try {
      tree = parseYaml(text) ?? {};
    } catch (err) {
      throw new ConfigError([`config file ${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`]);
    }
    if (typeof tree !== 'object' || Array.isArray(tree)) throw new ConfigError([`config file ${path} must contain a YAML mapping`]);
  }
  return buildConfig(interpolate(tree, env), env);
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Every key buildConfig reads, in reading order, with its type, range, default, environment variable
 * and description: the configuration table of the README (`npm run docs:config`, checked by
 * test/unit/config-table.test.ts). Types and defaults are recorded from the code that reads them, so
 * the table cannot drift from the behaviour; a key without a description is an error.
 */
export function describeConfigKeys(): Array<ConfigKeyInfo & { env: string | undefined; description: string; defaultText: string | undefined }> {
  recording = [];
  let read: ConfigKeyInfo[];
  try {
    buildConfig({ masterToken: '0'.repeat(64) }, {});
  } finally {
    read = recording;
    recording = undefined;
  }
  const envOf = new Map(ENV_OVERRIDES.map(([s, k, v]) => [s === null ? k : `${s}.${k}`, v]));
  const undocumented = read.filter((k) => CONFIG_DESCRIPTIONS[k.key] === undefined).map((k) => k.key);
  const stale = Object.keys(CONFIG_DESCRIPTIONS).filter((key) => !read.some((k) => k.key === key));
  if (undocumented.length > 0 || stale.length > 0) {
    throw new Error(
      `CONFIG_DESCRIPTIONS in src/config.ts is out of date: ${[...undocumented.map((k) => `${k} has no description`), ...stale.map((k) => `${k} is not a config key`)].join('; ')}`,
    );
  }
  // In the order of CONFIG_DESCRIPTIONS (the order of config.yaml), not the order of reading.
  return Object.entries(CONFIG_DESCRIPTIONS).map(([key, d]) => {
    const k = read.find((r) => r.key === key)!;
    return { ...k, env: envOf.get(key), description: d.description, defaultText: d.default };
  });
}

/** What each key means; `default` replaces the recorded default where the real one is computed. */
export const CONFIG_DESCRIPTIONS: Readonly<Record<string, { description: string; default?: string }>> = {
  masterToken: { description: 'The master token: exactly 64 lowercase hex characters. Keep it in the environment, never in the file.', default: 'required' },
  store: { description: '`redis` (production) or `memory` (one process, nothing persisted; what `npm run demo` uses).' },
  'redis.url': { description: 'Redis: `redis://`, `rediss://` (TLS), `redis+sentinel://`, `redis+cluster://` (see above).' },
  'redis.keyPrefix': { description: 'Prefix of every key the sidecar writes.' },
  'redis.commandTimeoutMs': { description: 'Bound on every Redis command; a slower Redis answers 503 (fail closed). At most 1500 so the 503 comes within 2 s.' },
  'redis.connectTimeoutMs': { description: 'Start-up gives up (exit 2) when Redis does not answer within this.' },
  'upstream.url': { description: 'Full URL of the upstream MCP endpoint.' },
  'upstream.headersTimeoutMs': { description: 'The upstream must send response headers within this (else 504); established streams are never cut.' },
  'upstream.healthTimeoutMs': { description: 'Bound on the upstream probe of `GET /health`.' },
  'upstream.maxSockets': { description: 'Keep-alive connections to the upstream.' },
  'proxy.host': { description: 'Proxy listener address.' },
  'proxy.port': { description: 'Proxy listener port (`0`: any free port, printed at start).' },
  'proxy.publicUrl': { description: 'External base URL clients use: in OAuth metadata and `WWW-Authenticate`.', default: '`http://localhost:<port>`' },
  'proxy.trustedProxies': { description: 'IPs/CIDRs (e.g. your ingress) whose `X-Forwarded-*` headers are kept and whose `X-Forwarded-For` names the client.' },
  'proxy.maxBodyBytes': { description: '`/mcp` request body cap (`0`: none; bodies are streamed, never buffered).' },
  'proxy.maxHeaderBytes': { description: 'Larger request headers get 431.' },
  'proxy.headersTimeoutMs': { description: 'A client must send its request headers within this (slowloris bound).' },
  'proxy.requestTimeoutMs': { description: 'A client must send its whole request body within this; responses are not bounded.' },
  'proxy.shutdownGraceMs': { description: 'On SIGTERM, in-flight requests get this long to finish.' },
  'admin.host': { description: 'Admin listener address (keep it private: loopback or the pod network).' },
  'admin.port': { description: 'Admin listener port (`0`: any free port).' },
  'admin.maxBodyBytes': { description: 'Admin request bodies over this get 413.' },
  'idp.issuer': { description: 'The identity provider whose JWTs `POST /token` exchanges for user-grade tokens: exact `iss`. Set issuer, audience and jwksUrl together, or none (exchange off).' },
  'idp.audience': { description: 'Exact `aud` the IdP JWT must carry.' },
  'idp.jwksUrl': { description: "URL of the IdP's JWKS (cached 10 min)." },
  'idp.algorithms': { description: 'JWS algorithms accepted from the IdP (asymmetric only).', default: '`RS256, ES256, PS256, EdDSA`' },
  'idp.clockToleranceSeconds': { description: 'Clock skew tolerated on `exp`/`nbf`.' },
  'idp.jwksTimeoutMs': { description: 'Bound on one JWKS fetch; an unreachable JWKS answers 503.' },
  'idp.jwksCooldownMs': { description: 'An unknown `kid` refetches the JWKS at most this often.' },
  'idp.allowedEmailDomains': { description: 'When set, only JWTs with a verified `email` in one of these domains may exchange.' },
  'idp.requiredGroup': { description: 'When set, only JWTs whose groups claim lists this group may exchange.' },
  'idp.groupsClaim': { description: 'The claim holding the groups list.' },
  'oauth.registration': { description: '`POST /register`: `open`, or `protected` (the master token as initial access token).' },
  'oauth.registrationRateLimitPerMinute': { description: 'Registrations per source address per minute, in this process.' },
  'oauth.unusedClientTtlSeconds': { description: 'A registered client that completes no grant for this long is forgotten.' },
  'oauth.clientMetadataDocuments.enabled': { description: 'Accept an https URL as `client_id`: the client\'s own metadata document, fetched with an SSRF guard (see docs/security.md).' },
  'oauth.clientMetadataDocuments.timeoutMs': { description: 'Bound on one document fetch, all of it (DNS, connect, TLS, headers, body).' },
  'oauth.clientMetadataDocuments.maxBytes': { description: 'Larger documents are refused (checked while the body streams in).' },
  'oauth.clientMetadataDocuments.cacheTtlSeconds': { description: 'A valid document is reused for at most this long (a shorter `Cache-Control: max-age` wins; `no-store` is honoured). Failures are never cached.' },
  'oauth.clientMetadataDocuments.cacheMaxEntries': { description: 'Documents kept in memory per process, least recently used evicted first.' },
  'oauth.clientMetadataDocuments.allowPrivateAddresses': { description: 'UNSAFE, tests and local development only: fetch documents from loopback, private, link-local and other internal addresses.' },
  'rateLimits.failedAuthPerMinute': { description: 'Failed authentications per client address per minute, across replicas; then 429 for that address (`0`: off).' },
  'rateLimits.tokenRequestsPerMinute': { description: '`POST /token` requests per `client_id` per minute, across replicas (`0`: off).' },
  'audit.stream': { description: 'Also append audit events to the capped Redis stream `<keyPrefix>audit` (read with `listAuditEvents`). They always go to the log.' },
  'audit.maxLen': { description: 'Approximate length cap of the audit stream (`XADD … MAXLEN ~`).' },
  logLevel: { description: 'Log level: `debug`, `info`, `warn` or `error`.' },
  logFormat: { description: '`auto`: human-readable lines when stdout is a terminal, JSON lines otherwise; `json` or `pretty` force one.' },
};
