// Every configuration key, declared once: its type, default, environment variable, flag and README
// description all come from its entry in CONFIG_KEYS (the larger groups are declared in keys/). Checks
// that need only one key's value live with the key; rules across keys are in rules.ts, loading in load.ts.

import { boolean, choice, integer, keysOf, structured, text, type KeyTree, type Tier, type ValuesOf } from './spec.ts';
import { parseRedisUrl, redactRedisUrl } from '../store/redis-url.ts';
import { compileQuotas } from '../policy/quotas.ts';
import { compileRules } from '../policy/rules.ts';
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from '../observability/logger.ts';
import { checkHttpUrl, checkMasterToken } from './keys/shared.ts';
import { UPSTREAM_KEYS } from './keys/upstream.ts';
import { PROXY_KEYS } from './keys/proxy.ts';
import { IDP_KEYS } from './keys/idp.ts';
import { OAUTH_KEYS } from './keys/oauth.ts';
import { RATE_LIMIT_KEYS } from './keys/rate-limits.ts';

export type { LogFormat, LogLevel };
export { checkHttpUrl, MAX_WORKERS, type CredentialMode } from './keys/shared.ts';

/**
 * Every configuration key, in the order of config.yaml and of docs/configuration.md's tables. Adding a
 * key is one entry here, with its tier: an essential one also gets a line in config.yaml and a place in
 * the README's table (tests check both). A problem names the key as the user wrote it: the environment
 * variable, the flag (`--proxy.port`) or the dotted key.
 */
export const CONFIG_KEYS = {
  masterToken: text({
    tier: 'essential',
    default: '',
    env: 'BEARER_SECRET_MASTER',
    secret: true,
    defaultText: 'required',
    description:
      'The master token: exactly 64 lowercase hex characters from a CSPRNG (`mcp-bearer-proxy token generate`); placeholders such as all zeros or a repeated pattern are refused. Keep it in the environment, never in the file.',
    check: checkMasterToken,
  }),
  store: choice(['redis', 'memory'], {
    tier: 'tuning',
    default: 'redis',
    description: '`redis` (production) or `memory` (one process, nothing persisted, expired records swept; what `npm run demo` uses).',
  }),
  redis: {
    url: text({
      tier: 'essential',
      default: 'redis://127.0.0.1:6379',
      env: 'REDIS_URL',
      description: 'Redis: `redis://`, `rediss://` (TLS), `redis+sentinel://`, `redis+cluster://` (see above).',
      check: (url, label, problems) => {
        try {
          parseRedisUrl(url);
        } catch (err) {
          problems.push(`${label} "${redactRedisUrl(url)}": ${(err as Error).message}`);
        }
      },
    }),
    keyPrefix: text({ tier: 'tuning', default: 'mcpauth:', description: 'Prefix of every key the sidecar writes.' }),
    commandTimeoutMs: integer({
      tier: 'tuning',
      default: 1000,
      min: 10,
      max: 1500,
      description: 'Bound on every Redis command; a slower Redis answers 503 (fail closed). At most 1500 so the 503 comes within 2 s.',
    }),
    connectTimeoutMs: integer({
      tier: 'tuning',
      default: 5000,
      min: 100,
      max: 60000,
      description:
        'Start-up gives up (exit 2) when Redis does not answer within this; a refused connection or refused credentials stop it at once.',
    }),
    lookupCache: choice(['auto', 'off', 'tracking'], {
      tier: 'tuning',
      default: 'auto',
      env: 'REDIS_LOOKUP_CACHE',
      description:
        "`tracking`: token records are cached in process and invalidated by Redis (CLIENT TRACKING); a cached record is served only after a barrier (a PING behind the pending invalidations) sent after the request arrived, so a hand edit whose reply came before the request is seen by it, and the cache is unused while that cannot be vouched for (see docs/lookup-cache.md); on Redis Cluster with two connections per master, the barrier sent to the masters of the token's slots and the cache set up anew on any topology change; start-up stops when Redis refuses tracking. `auto`: `tracking` where the store allows it, else `off` with one warning at start-up and `mcp_auth_lookup_cache_unavailable` (an ACL user without CLIENT TRACKING, Redis before 6.0, on Cluster before 7.0). `off`: every request reads its token from Redis, no cache connection. Ignored by the memory store.",
    }),
    lookupCacheMaxEntries: integer({
      tier: 'tuning',
      default: 100000,
      min: 1,
      max: 10_000_000,
      env: 'REDIS_LOOKUP_CACHE_MAX_ENTRIES',
      description: 'With the lookup cache on, token records kept per process (least recently used evicted first).',
    }),
    lookupCachePingIntervalMs: integer({
      tier: 'tuning',
      default: 1000,
      min: 50,
      max: 60000,
      description:
        'With the lookup cache on, both cache connections are PINGed this often; one that does not answer within `commandTimeoutMs` empties the cache (bound on how long a silently dead invalidation connection can go unnoticed).',
    }),
  },
  upstream: UPSTREAM_KEYS,
  proxy: PROXY_KEYS,
  admin: {
    host: text({
      tier: 'essential',
      default: '127.0.0.1',
      env: 'ADMIN_HOST',
      description: 'Admin listener address (keep it private: loopback or the pod network).',
    }),
    port: integer({
      tier: 'essential',
      default: 8081,
      min: 0,
      max: 65535,
      env: 'ADMIN_PORT',
      description: 'Admin listener port (`0`: any free port).',
    }),
    maxBodyBytes: integer({
      tier: 'tuning',
      default: 65536,
      min: 1024,
      max: 1048576,
      description: 'Admin request bodies over this get 413.',
    }),
  },
  /** SCIM 2.0 on the admin listener (src/admin/scim/, docs/identity-providers.md); off while `scim.token` is unset. */
  scim: {
    token: text({
      tier: 'tuning',
      default: '',
      env: 'SCIM_TOKEN',
      secret: true,
      description:
        "The bearer token a directory (Entra ID, Okta) presents at the admin listener's `/scim/v2`: 64 lowercase hex characters from a CSPRNG, not the master token. Unset: no SCIM (`/scim/v2` answers 404). It opens only SCIM, and the master token does not open SCIM.",
      check: (token, label, problems) => {
        if (token !== '') checkMasterToken(token, label === 'scim.token' ? 'SCIM_TOKEN' : label, problems);
      },
    }),
    match: choice(['sub', 'email'], {
      tier: 'tuning',
      default: 'sub',
      description:
        "The identity-provider claim a SCIM user's `userName` carries: `sub` (compared exactly) or `email` (the verified email, ignoring case). A user the directory made inactive or deleted is refused at sign-in when the claim matches.",
    }),
    provider: text({
      tier: 'tuning',
      default: 'default',
      description: 'The identity provider whose people the directory provisions (`default`: the one configured by the `IDP_*` variables).',
    }),
  },
  idp: IDP_KEYS,
  oauth: OAUTH_KEYS,
  rateLimits: RATE_LIMIT_KEYS,
  audit: {
    stream: boolean({
      tier: 'tuning',
      default: true,
      description:
        "Also append audit events to capped Redis streams: the master token's to `<keyPrefix>audit:admin`, the rest to `<keyPrefix>audit` (read together with `listAuditEvents`). They always go to the log.",
    }),
    maxLen: integer({
      tier: 'tuning',
      default: 10000,
      min: 100,
      max: 10_000_000,
      description: 'Approximate length cap of each audit stream (`XADD … MAXLEN ~`).',
    }),
  },
  /** Per-tool policy on `POST /mcp` (src/policy/, docs/policy.md); off while `policy.rules` is unset. */
  policy: {
    rules: structured(
      'list of rules',
      {
        tier: 'essential',
        description:
          'Ordered allow/deny rules over principals and MCP calls (see docs/policy.md). Unset: no policy; a `POST /mcp` body up to 1 MiB is still read whole, and parsed only when it may name a task (docs/sessions.md). Set: every `POST /mcp` body is read as JSON-RPC and decided.',
      },
      (raw, label, problems) => compileRules(raw, label, problems),
    ),
    default: choice(['allow', 'deny'], { tier: 'tuning', default: 'deny', description: 'What a call no rule matches gets.' }),
    quotas: structured(
      'list of quota rules',
      {
        tier: 'essential',
        description:
          'Per-caller quotas on `/mcp` requests (see docs/quotas.md): `{name?, match: {tools?, methods?, principals?}, per: subject|client|address, limit, windowSeconds}`, the first matching rule counts a request, in Redis (shared by replicas). Over it: a tool error for `tools/call`, 429 with `Retry-After` otherwise. Set without `policy.rules`: every call is allowed and only counted.',
      },
      (raw, label, problems) => compileQuotas(raw, label, problems),
    ),
    maxBodyBytes: integer({
      tier: 'tuning',
      default: 1048576,
      min: 1024,
      max: 67108864,
      description: 'With a policy, larger `POST /mcp` bodies are refused with 413 (the body must be read whole to be decided).',
    }),
    maxBatch: integer({
      tier: 'tuning',
      default: 100,
      min: 1,
      max: 10000,
      description: 'With a policy, JSON-RPC batches longer than this are refused with 400.',
    }),
    maxDepth: integer({
      tier: 'tuning',
      default: 64,
      min: 2,
      max: 1024,
      description: 'With a policy, JSON nested deeper than this is refused with 400.',
    }),
    /** Calls held by `effect: approve` rules (docs/approval.md). */
    approval: {
      webhook: text({
        tier: 'tuning',
        description:
          'URL that receives a POST (JSON, with a `text` line chat tools show) for each call held for approval, signed `X-Signature: sha256=<HMAC>` with `policy.approval.webhookSecret`; a failure is logged and counted, never blocks the call (docs/approval.md).',
        check: (url, label, problems) => {
          if (url !== undefined) checkHttpUrl(label, url, problems);
        },
      }),
      webhookSecret: text({
        tier: 'tuning',
        secret: true,
        description:
          "The HMAC-SHA-256 key of the approval webhook's `X-Signature` (at least 32 characters); interpolate it from the environment (`${VAR}` in config.yaml).",
        check: (secret, label, problems) => {
          if (secret !== undefined && secret.length < 32) problems.push(`${label} must be at least 32 characters`);
        },
      }),
    },
  },
  logLevel: choice(LOG_LEVELS, {
    tier: 'essential',
    default: 'info',
    env: 'LOG_LEVEL',
    description: 'Log level: `debug`, `info`, `warn` or `error`.',
  }),
  logFormat: choice(LOG_FORMATS, {
    tier: 'tuning',
    default: 'auto',
    env: 'LOG_FORMAT',
    description: '`auto`: human-readable lines when stdout is a terminal, JSON lines otherwise; `json` or `pretty` force one.',
  }),
} satisfies KeyTree;

/** The validated, frozen configuration: one field per entry of CONFIG_KEYS. */
export type Config = ValuesOf<typeof CONFIG_KEYS>;

/** One row of docs/configuration.md's configuration tables. */
export interface ConfigKeyInfo {
  key: string;
  tier: Tier;
  env: string | undefined;
  type: string;
  /** The value used when the key is absent; undefined: none (unset). */
  default: unknown;
  /** Replaces the formatted default where the real one is computed or required. */
  defaultText: string | undefined;
  description: string;
}

/** Every declared key, in declaration order: docs/configuration.md's tables (`npm run docs:config`). */
export function describeConfigKeys(): ConfigKeyInfo[] {
  return keysOf(CONFIG_KEYS).map(([key, spec]) => ({
    key,
    tier: spec.doc.tier,
    env: spec.doc.env,
    type: spec.type,
    default: spec.default === '' ? undefined : spec.default,
    defaultText: spec.doc.defaultText,
    description: spec.doc.description,
  }));
}
