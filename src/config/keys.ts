// Every configuration key, declared once: its type, default, environment variable, flag and README
// description all come from its entry in CONFIG_KEYS. Checks that need only one key's value live with
// the key; rules across keys are in rules.ts, loading in load.ts.

import { isTokenShaped, weakTokenReason } from '../model/credentials.ts';
import { boolean, choice, integer, keysOf, list, structured, text, type KeyTree, type Problems, type Tier, type ValuesOf } from './spec.ts';
import { parseCidr } from '../http/net-address.ts';
import { parseRedisUrl, redactRedisUrl } from '../store/redis-url.ts';
import { compileQuotas } from '../policy/quotas.ts';
import { compileRules } from '../policy/rules.ts';
import { DEFAULT_PROFILES } from '../model/profiles.ts';
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from '../observability/logger.ts';
import { parseCredentialKey } from '../upstream-credentials/cipher.ts';

export type { LogFormat, LogLevel };

const CREDENTIAL_MODES = ['none', 'idp', 'token-exchange', 'oauth'] as const;
export type CredentialMode = (typeof CREDENTIAL_MODES)[number];
const DEFAULT_IDP_ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];
const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** The most proxy worker processes: the bound of `proxy.workers`, and of `0` (one per CPU) on a large machine. */
export const MAX_WORKERS = 64;
const GENERATE_HINT = 'generate one with `node bin/mcp-bearer-proxy.js token generate` or `openssl rand -hex 32`';

/** The token lifetimes of one built-in client profile, defaulting to its built-in definition. */
function profileLifetimes(name: string, clients: string) {
  const builtIn = DEFAULT_PROFILES.find((p) => p.name === name)!;
  return {
    accessTokenLifetimeSeconds: integer({
      tier: 'tuning',
      default: builtIn.accessTokenLifetimeSeconds,
      min: 60,
      max: 7 * 24 * 3600,
      description: `Access tokens from \`/token\` for clients of the \`${name}\` profile (${clients}). Keep it well above a minute: mcp-remote refreshes when less than 60 s remain.`,
    }),
    refreshTokenLifetimeSeconds: integer({
      tier: 'tuning',
      default: builtIn.refreshTokenLifetimeSeconds,
      min: 0,
      max: 365 * 24 * 3600,
      description: `Refresh tokens for clients of the \`${name}\` profile, renewed at each rotation (\`0\`: none).`,
    }),
  };
}

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
        '`tracking`: token records are cached in process and invalidated by Redis (CLIENT TRACKING); a cached record is served only after a barrier (a PING behind the pending invalidations) sent after the request arrived, so a hand edit whose reply came before the request is seen by it, and the cache is unused while that cannot be vouched for (see docs/lookup-cache.md); Standalone and Sentinel only, and start-up stops when Redis refuses tracking. `auto`: `tracking` where the store allows it, else `off` with one warning at start-up and `mcp_auth_lookup_cache_unavailable` (Redis Cluster, an ACL user without CLIENT TRACKING, Redis before 6.0). `off`: every request reads its token from Redis, no cache connection. Ignored by the memory store.',
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
  upstream: {
    url: text({
      tier: 'essential',
      default: 'http://127.0.0.1:3000/mcp',
      env: 'UPSTREAM_URL',
      description: "Full URL of the upstream MCP endpoint. It must not be the sidecar's own proxy listener (that would loop).",
      check: (url, label, problems) => checkHttpUrl(label, url, problems, true),
    }),
    headersTimeoutMs: integer({
      tier: 'tuning',
      default: 60000,
      min: 10,
      max: 3600000,
      description: 'The upstream must send response headers within this (else 504); established streams are never cut.',
    }),
    healthTimeoutMs: integer({
      tier: 'tuning',
      default: 2000,
      min: 10,
      max: 60000,
      description: 'Bound on the upstream probe of `GET /health` and on the start-up probe of the MCP endpoint.',
    }),
    maxSockets: integer({ tier: 'tuning', default: 1024, min: 1, max: 65536, description: 'Keep-alive connections to the upstream.' }),
    assertion: boolean({
      tier: 'tuning',
      default: false,
      env: 'UPSTREAM_ASSERTION',
      description:
        'Every forwarded request carries `X-MCP-Auth-Assertion`: an ES256 JWT naming the caller, which the upstream verifies against `<PUBLIC_URL>/.well-known/jwks.json` (see docs/assertion.md).',
    }),
    assertionAudience: text({
      tier: 'tuning',
      env: 'UPSTREAM_ASSERTION_AUDIENCE',
      defaultText: 'the origin of `upstream.url`',
      description: 'The `aud` of the assertion: what the upstream checks it is the intended recipient.',
    }),
    assertionLifetimeSeconds: integer({
      tier: 'tuning',
      default: 60,
      min: 10,
      max: 300,
      env: 'UPSTREAM_ASSERTION_LIFETIME_SECONDS',
      description: 'Lifetime of an assertion (`exp - iat`); one is reused for the same caller while more than half of it is left.',
    }),
    assertionKeyRotationSeconds: integer({
      tier: 'tuning',
      default: 86400,
      min: 600,
      max: 31_536_000,
      description:
        'A generated signing key is replaced this often; the next one is listed in the JWKS two minutes before it signs anything.',
    }),
    assertionKey: text({
      tier: 'tuning',
      env: 'UPSTREAM_ASSERTION_KEY',
      secret: true,
      description:
        'A P-256 private key (PEM, or a JWK as JSON) to sign with instead of a generated one, for upstreams that pin a key. Never rotated by the sidecar; every replica must be given the same one.',
    }),
    assertionKeyFile: text({
      tier: 'tuning',
      env: 'UPSTREAM_ASSERTION_KEY_FILE',
      description: 'As `assertionKey`, read from this file at start-up.',
    }),
    /** The user's own credential for the upstream (src/upstream-credentials/, docs/upstream-credentials.md). */
    credentials: {
      mode: choice(CREDENTIAL_MODES, {
        tier: 'essential',
        default: 'none',
        env: 'UPSTREAM_CREDENTIALS',
        description:
          "What each forwarded request carries as the user's own credential for the upstream: `none`; `idp` (the user's IdP access token from browser sign-in, refreshed); `token-exchange` (RFC 8693 at the IdP for `audience`); `oauth` (a connected account at `provider`). See docs/upstream-credentials.md.",
      }),
      header: text({
        tier: 'tuning',
        default: 'authorization',
        env: 'UPSTREAM_CREDENTIALS_HEADER',
        description:
          'The request header the credential goes in: `authorization` (value `Bearer <token>`), or another name (value: the raw token), e.g. `x-github-token`.',
        normalise: (name) => name.toLowerCase(),
        check: checkCredentialHeader,
      }),
      serviceToken: text({
        tier: 'tuning',
        env: 'UPSTREAM_CREDENTIALS_SERVICE_TOKEN',
        secret: true,
        description:
          'Sent in the credential header for tokens that carry no user (client_credentials, master, admin-made tokens); unset: nothing is sent for them.',
      }),
      audience: text({
        tier: 'tuning',
        env: 'UPSTREAM_CREDENTIALS_AUDIENCE',
        description: 'Mode `token-exchange`: the `audience` asked of the IdP (the upstream API as the IdP names it).',
      }),
      key: text({
        tier: 'tuning',
        env: 'UPSTREAM_CREDENTIALS_KEY',
        secret: true,
        description:
          'The key the kept tokens are encrypted with (AES-256-GCM): 32 random bytes as 64 hex characters or base64 (`openssl rand -hex 32`). Required by every mode but `none`; the same on every replica.',
        check: (key, label, problems) => {
          if (key !== undefined) checkCredentialKey(key, label, problems);
        },
      }),
      previousKeys: list({
        tier: 'tuning',
        default: [],
        env: 'UPSTREAM_CREDENTIALS_PREVIOUS_KEYS',
        secret: true,
        description:
          'Older keys (same form, comma-separated in the environment) that still decrypt what they encrypted, for rotation; `reencryptUpstreamCredentials` rewrites everything under `key`.',
        check: (keys, label, problems) => keys.forEach((key, i) => checkCredentialKey(key, `${label}[${i}]`, problems)),
      }),
      provider: {
        issuer: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_ISSUER',
          description:
            "Mode `oauth`: the provider's issuer (endpoints from its OpenID discovery document); or set authorizationEndpoint and tokenEndpoint.",
          check: (url, label, problems) => {
            if (url !== undefined) checkHttpUrl(label, url, problems);
          },
        }),
        authorizationEndpoint: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT',
          description: 'Mode `oauth`, a provider without discovery (GitHub OAuth apps): where the browser authorizes.',
          check: (url, label, problems) => {
            if (url !== undefined) checkHttpUrl(label, url, problems);
          },
        }),
        tokenEndpoint: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_TOKEN_ENDPOINT',
          description: 'Mode `oauth`, a provider without discovery: where codes and refresh tokens are redeemed.',
          check: (url, label, problems) => {
            if (url !== undefined) checkHttpUrl(label, url, problems);
          },
        }),
        clientId: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_CLIENT_ID',
          description: "Mode `oauth`: the sidecar's client id at the provider (callback `PUBLIC_URL/connect/callback`).",
        }),
        clientSecret: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_CLIENT_SECRET',
          secret: true,
          description: "Mode `oauth`: the sidecar's client secret at the provider. Keep it in the environment.",
        }),
        scopes: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_SCOPES',
          description:
            'Mode `oauth`: scopes asked of the provider (space-separated; unset: none asked). With `openid` among them a nonce is sent and an ID token required; without, none (GitHub issues none).',
        }),
        name: text({
          tier: 'tuning',
          env: 'UPSTREAM_PROVIDER_NAME',
          description:
            'Mode `oauth`: the provider\'s name as people read it ("GitHub"), on the connect pages and in the `-32042` message; unset: the provider\'s host.',
        }),
      },
    },
  },
  proxy: {
    host: text({ tier: 'essential', default: '0.0.0.0', env: 'HOST', description: 'Proxy listener address.' }),
    port: integer({
      tier: 'essential',
      default: 8080,
      min: 0,
      max: 65535,
      env: 'PORT',
      description: 'Proxy listener port (`0`: any free port, printed at start).',
    }),
    publicUrl: text({
      tier: 'essential',
      env: 'PUBLIC_URL',
      defaultText: '`http://localhost:<port>`',
      description:
        'External base URL clients use: in OAuth metadata and `WWW-Authenticate`. The base only: the sidecar adds `/mcp`, so a URL ending in `/mcp`, or with a query or fragment, is refused; a trailing slash is dropped.',
      normalise: (url) => url?.replace(/\/+$/, ''),
      check: (url, label, problems) => {
        if (url !== undefined) checkPublicUrl(label, url, problems);
      },
    }),
    allowedHosts: list({
      tier: 'tuning',
      default: [],
      description:
        "Host names `/mcp` and `/health` answer for besides `PUBLIC_URL`'s (DNS rebinding protection; any other Host gets 421). Loopback names are allowed when the listener is on loopback or `PUBLIC_URL` is unset.",
    }),
    allowedOrigins: list({
      tier: 'tuning',
      default: [],
      description:
        "Browser origins allowed on `/mcp` and `/health` besides `PUBLIC_URL`'s (a request with any other `Origin` gets 403); loopback origins under the same rule as loopback hosts.",
    }),
    trustedProxies: list({
      tier: 'essential',
      default: [],
      description:
        'IPs/CIDRs (e.g. your ingress) whose `X-Forwarded-*` headers are kept and whose `X-Forwarded-For` names the client (its last entry: `IP`, `IP:port` or `[IPv6]:port`).',
      check: (entries, label, problems) => {
        for (const entry of entries)
          if (parseCidr(entry) === undefined) problems.push(`${label} entry "${entry}" is not an IP address or CIDR`);
      },
    }),
    forwardAuth: boolean({
      tier: 'essential',
      default: false,
      env: 'FORWARD_AUTH',
      description:
        'Also answer `/authz` (any method): the authorization service of an ingress that forwards `/mcp` itself (nginx `auth_request`, Caddy `forward_auth`, Traefik `ForwardAuth`, Envoy `ext_authz`); see docs/forward-auth.md.',
    }),
    forwardAuthLogAllowed: boolean({
      tier: 'tuning',
      default: false,
      description:
        "Write an access log line for each allowed `/authz` check too. Off by default: the ingress logs the request it forwards (and can log the identity headers `/authz` returns), and the line is about a quarter of the sidecar's CPU per check. Denied and refused checks are always logged; metrics and audit events are unchanged.",
    }),
    maxBodyBytes: integer({
      tier: 'tuning',
      default: 0,
      min: 0,
      description:
        '`/mcp` request body cap (`0`: none): a larger declared length gets 413, a chunked body is cut when it passes it. Without a policy a `POST` body up to 1 MiB is read whole to find the task ids it names (docs/sessions.md); larger ones stream.',
    }),
    maxHeaderBytes: integer({ tier: 'tuning', default: 16384, min: 1024, max: 1048576, description: 'Larger request headers get 431.' }),
    headersTimeoutMs: integer({
      tier: 'tuning',
      default: 10000,
      min: 100,
      max: 600000,
      description: 'A client must send its request headers within this (slowloris bound).',
    }),
    requestTimeoutMs: integer({
      tier: 'tuning',
      default: 300000,
      min: 0,
      max: 86400000,
      description: 'A client must send its whole request body within this; responses are not bounded.',
    }),
    shutdownGraceMs: integer({
      tier: 'tuning',
      default: 10000,
      min: 0,
      max: 600000,
      description: 'On SIGTERM, in-flight requests get this long to finish.',
    }),
    workers: integer({
      tier: 'tuning',
      default: 1,
      min: 0,
      max: MAX_WORKERS,
      env: 'WORKERS',
      description:
        'Proxy worker processes sharing the proxy port (`node:cluster`); `1`: one process, no cluster; `0`: one per available CPU, at most 64. With more than one, the primary process serves the admin listener and `/metrics` (summed over workers). Needs the Redis store.',
    }),
    handleIdleMs: integer({
      tier: 'tuning',
      default: 86400000,
      min: 1000,
      max: 2592000000,
      description:
        "How long an upstream's MCP session id or task id stays bound to the caller that received it after its last use (sliding); a request presenting one bound to another caller gets the upstream's own 404 / unknown-task answer (docs/sessions.md). Set it at least as long as the upstream keeps an idle session.",
    }),
    streamRecheckMs: integer({
      tier: 'tuning',
      default: 30000,
      min: 50,
      max: 3600000,
      description:
        "Every open SSE stream's token is looked up again this often, in one batch, and the stream ended if it no longer authorizes: the bound for a revocation written into Redis by hand. Revocations through the sidecar end streams at once, expiry at `expiresAt`.",
    }),
  },
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
  idp: {
    issuer: text({
      tier: 'essential',
      env: 'IDP_ISSUER',
      description:
        'The identity provider: exact `iss` of the JWTs `POST /token` exchanges for user-grade tokens (set with audience and jwksUrl), and the OpenID provider of browser sign-in (set with clientId and clientSecret; endpoints from its discovery document).',
    }),
    audience: text({ tier: 'essential', env: 'IDP_AUDIENCE', description: 'Exact `aud` the IdP JWT must carry.' }),
    jwksUrl: text({
      tier: 'essential',
      env: 'IDP_JWKS_URL',
      description: "URL of the IdP's JWKS (cached 10 min).",
      check: (url, label, problems) => {
        if (url !== undefined) checkHttpUrl(label, url, problems);
      },
    }),
    algorithms: list({
      tier: 'tuning',
      default: DEFAULT_IDP_ALGORITHMS,
      defaultText: `\`${DEFAULT_IDP_ALGORITHMS.join(', ')}\``,
      description: 'JWS algorithms accepted from the IdP (asymmetric only).',
      normalise: (algorithms) => (algorithms.length > 0 ? algorithms : [...DEFAULT_IDP_ALGORITHMS]),
      check: (algorithms, label, problems) => {
        for (const alg of algorithms) {
          if (!ASYMMETRIC_ALGORITHMS.includes(alg))
            problems.push(`${label}: "${alg}" is not allowed (use asymmetric algorithms: ${ASYMMETRIC_ALGORITHMS.join(', ')})`);
        }
      },
    }),
    clockToleranceSeconds: integer({ tier: 'tuning', default: 30, min: 0, max: 300, description: 'Clock skew tolerated on `exp`/`nbf`.' }),
    jwksTimeoutMs: integer({
      tier: 'tuning',
      default: 5000,
      min: 100,
      max: 60000,
      description: 'Bound on one JWKS fetch; an unreachable JWKS answers 503.',
    }),
    jwksCooldownMs: integer({
      tier: 'tuning',
      default: 30000,
      min: 0,
      max: 3600000,
      description: 'An unknown `kid` refetches the JWKS at most this often.',
    }),
    allowedEmailDomains: list({
      tier: 'tuning',
      default: [],
      description: 'When set, only JWTs with a verified `email` in one of these domains may exchange.',
      normalise: (domains) => domains.map((d) => d.toLowerCase()),
    }),
    requireVerifiedEmail: boolean({
      tier: 'tuning',
      default: true,
      description:
        "An IdP `email` counts (for `idp.allowedEmailDomains` and the policy's `principals.emailDomains`) only when the claim named by `idp.emailVerifiedClaim` is `true`. `false`: for an IdP that never sends such a claim and only releases addresses it owns; an explicit `false` is still refused (docs/security.md).",
    }),
    emailVerifiedClaim: text({
      tier: 'tuning',
      default: 'email_verified',
      description:
        'The boolean claim saying the IdP verified `email` (Entra ID: `xms_edov`, an optional claim to add in the app registration).',
    }),
    requiredGroup: text({ tier: 'tuning', description: 'When set, only JWTs whose groups claim lists this group may exchange.' }),
    groupsClaim: text({ tier: 'tuning', default: 'groups', description: 'The claim holding the groups list.' }),
    clientId: text({
      tier: 'essential',
      env: 'IDP_CLIENT_ID',
      description:
        "Browser sign-in: the sidecar's client id at the IdP (an OpenID Connect client whose redirect URI is `PUBLIC_URL/oauth/callback`). Set issuer, clientId and clientSecret together, or none (no `/authorize`).",
    }),
    clientSecret: text({
      tier: 'essential',
      env: 'IDP_CLIENT_SECRET',
      secret: true,
      description: "Browser sign-in: the sidecar's client secret at the IdP (sent as client_secret_basic). Keep it in the environment.",
    }),
    scopes: text({
      tier: 'essential',
      default: 'openid email profile',
      env: 'IDP_SCOPES',
      description: 'Browser sign-in: scopes asked of the IdP (must include `openid`).',
      check: (scopes, label, problems) => {
        if (!scopes.split(' ').includes('openid')) problems.push(`${label} must include openid`);
      },
    }),
    requestTimeoutMs: integer({
      tier: 'tuning',
      default: 5000,
      min: 100,
      max: 60000,
      description: 'Browser sign-in: bound on each call to the IdP (discovery, code exchange, keys); past it the browser gets a 503 page.',
    }),
    idJag: boolean({
      tier: 'tuning',
      default: false,
      env: 'IDP_ID_JAG',
      description:
        "Enterprise-managed authorization: `POST /token` takes the IdP's Identity Assertion JWT Authorization Grants (`grant_type` jwt-bearer, `typ` `oauth-id-jag+jwt`) from confidential clients holding that grant. Needs issuer and jwksUrl (docs/id-jag.md).",
    }),
  },
  oauth: {
    registration: choice(['open', 'protected'], {
      tier: 'tuning',
      default: 'open',
      description: '`POST /register`: `open`, or `protected` (the master token as initial access token).',
    }),
    registrationRateLimitPerMinute: integer({
      tier: 'tuning',
      default: 10,
      min: 1,
      max: 100000,
      description: 'Registrations per client address per minute, across replicas.',
    }),
    unusedClientTtlSeconds: integer({
      tier: 'tuning',
      default: 30 * 24 * 3600,
      min: 60,
      max: 10 * 365 * 24 * 3600,
      description: 'A registered client that completes no grant for this long is forgotten.',
    }),
    neverUsedClientTtlSeconds: integer({
      tier: 'tuning',
      default: 3600,
      min: 1800,
      max: 10 * 365 * 24 * 3600,
      description:
        'A client registered at `/register` that completes no grant within this long is forgotten (clients such as Claude Code register anew on every sign-in; a sign-in takes at most about 21 minutes). Its first grant keeps it for `unusedClientTtlSeconds`.',
    }),
    consentRememberSeconds: integer({
      tier: 'tuning',
      default: 30 * 24 * 3600,
      min: 0,
      max: 365 * 24 * 3600,
      env: 'OAUTH_CONSENT_REMEMBER_SECONDS',
      description:
        "Browser sign-in: how long a user's approval on the consent page is remembered in that browser (a checkbox, on by default), for that IdP user, client, exact redirect URI and scope set; a sign-in within it asking for no more is not asked again. Revoking the tokens issued under it, or deleting the client, ends it (`0`: always ask).",
    }),
    introspectionClients: list({
      tier: 'tuning',
      default: [],
      description:
        '`POST /introspect`: client ids (confidential clients) that may see any token as active, user-grade tokens included. Any other client sees only its own tokens as active; the master token sees all.',
    }),
    refreshReuseGraceSeconds: integer({
      tier: 'tuning',
      default: 300,
      min: 0,
      max: 3600,
      env: 'OAUTH_REFRESH_REUSE_GRACE_SECONDS',
      description:
        'A rotated refresh token presented again within this many seconds of its rotation (parallel sessions of one client that share its tokens, a retry) is answered with the same pair its rotation issued, however often; after it, a presentation revokes the family (`0`: always revoke).',
    }),
    requireDpop: boolean({
      tier: 'tuning',
      default: false,
      description:
        '`/mcp`, `/health` and `/authz` accept only DPoP-bound tokens (`Authorization: DPoP` with a proof, RFC 9449): unbound OAuth and user-grade tokens presented as `Bearer` are refused (the master token is not). Off: a `DPoP` proof at `/token` binds the token, unbound Bearer tokens keep working (docs/dpop.md).',
    }),
    dpopProofWindowSeconds: integer({
      tier: 'tuning',
      default: 60,
      min: 5,
      max: 600,
      description:
        'A DPoP proof is accepted while its `iat` is this close to now, either way; its `jti` is remembered (across replicas) for twice as long.',
    }),
    dpopNonce: boolean({
      tier: 'tuning',
      default: false,
      description:
        'DPoP proofs must carry a server nonce (RFC 9449 §8, §9): a proof without a current one is answered `use_dpop_nonce` with a `DPoP-Nonce` header. Nonces live one to two proof windows and every replica accepts them (derived from the master token).',
    }),
    /**
     * Token lifetimes of the built-in client profiles: configuration decides them on every replica
     * (a stored profile's lifetimes are not read for these names; src/model/profiles.ts).
     */
    profiles: {
      default: profileLifetimes('default', 'machine clients an administrator creates'),
      service: profileLifetimes('service', 'long-running services, no refresh tokens by default'),
      dynamic: profileLifetimes('dynamic', 'registered clients that exchange IdP JWTs'),
      interactive: profileLifetimes('interactive', 'clients whose user signs in through the browser: Claude, VS Code, mcp-remote, ...'),
    },
    /** `client_id` as an https URL naming the client's own metadata document (src/oauth/cimd.ts). */
    clientMetadataDocuments: {
      enabled: boolean({
        tier: 'tuning',
        default: true,
        description:
          "Accept an https URL as `client_id`: the client's own metadata document, fetched with an SSRF guard (see docs/security.md).",
      }),
      timeoutMs: integer({
        tier: 'tuning',
        default: 5000,
        min: 100,
        max: 60000,
        description: 'Bound on one document fetch, all of it (DNS, connect, TLS, headers, body).',
      }),
      maxBytes: integer({
        tier: 'tuning',
        default: 5120,
        min: 512,
        max: 1048576,
        description: 'Larger documents are refused (checked while the body streams in).',
      }),
      cacheTtlSeconds: integer({
        tier: 'tuning',
        default: 600,
        min: 0,
        max: 86400,
        description:
          'A valid document or key set is reused for at most this long (a shorter `Cache-Control: max-age` wins; `no-store` is honoured).',
      }),
      failureCacheSeconds: integer({
        tier: 'tuning',
        default: 30,
        min: 0,
        max: 3600,
        description:
          'A document or key-set URL whose fetch failed gives the same failure for this long without being fetched again, per process (`0`: every use fetches again).',
      }),
      keySetRefetchCooldownSeconds: integer({
        tier: 'tuning',
        default: 30,
        min: 1,
        max: 3600,
        description:
          "A client assertion whose `kid` is not in the client's cached key set (or document `jwks`) fetches it again once, unless it was fetched less than this long ago; a key removed from the set stops working from that fetch on.",
      }),
      cacheMaxEntries: integer({
        tier: 'tuning',
        default: 1000,
        min: 0,
        max: 1_000_000,
        description: 'Documents and key sets kept in memory per process, least recently used evicted first.',
      }),
      fetchesPerMinutePerAddress: integer({
        tier: 'tuning',
        default: 20,
        min: 0,
        max: 1_000_000,
        description:
          'Document and key-set (`jwks_uri`) fetches one client address may cause per minute, at `/authorize`, `/token`, `/revoke` and `/introspect` together, across replicas (a cached one costs none); then 429. An address over `rateLimits.failedAuthPerMinute` causes none (`0`: off).',
      }),
      maxConcurrentFetches: integer({
        tier: 'tuning',
        default: 16,
        min: 1,
        max: 10_000,
        description:
          'Outbound document and key-set (`jwks_uri`) fetches at once per process; a fetch over the cap waits up to 2 s for a slot, then the request gets 503 with `Retry-After`.',
      }),
      maxConcurrentFetchesPerAddress: integer({
        tier: 'tuning',
        default: 4,
        min: 1,
        max: 10_000,
        description:
          "Of `maxConcurrentFetches`, how many one client address may hold at once; its further fetches wait like those over the cap, while other addresses' fetches still find slots.",
      }),
      allowPrivateAddresses: boolean({
        tier: 'tuning',
        default: false,
        description:
          'UNSAFE, tests and local development only: fetch documents from loopback, private, link-local and other internal addresses.',
      }),
    },
  },
  rateLimits: {
    failedAuthPerMinute: integer({
      tier: 'tuning',
      default: 120,
      min: 0,
      max: 1_000_000,
      description:
        'Failed authentications per client address per minute (bad tokens on `/mcp`, `/health` and `/authz`, failed client authentications and bad grants on `/token`, `/revoke`, `/introspect`), across replicas; then further failures from that address get 429, valid credentials are still served (`0`: off).',
    }),
    tokenRequestsPerMinute: integer({
      tier: 'tuning',
      default: 60,
      min: 0,
      max: 1_000_000,
      description:
        "`POST /token` requests per client and client address per minute, across replicas: a confidential client's once it authenticated, a public client's once its grant succeeded; failures are counted by `failedAuthPerMinute` only (`0`: off).",
    }),
    revocationRequestsPerMinute: integer({
      tier: 'tuning',
      default: 60,
      min: 0,
      max: 1_000_000,
      description: '`POST /revoke` requests per client address per minute, across replicas (`0`: off).',
    }),
    introspectionRequestsPerMinute: integer({
      tier: 'tuning',
      default: 600,
      min: 0,
      max: 1_000_000,
      description: '`POST /introspect` requests per client address per minute, across replicas (`0`: off).',
    }),
    authorizeRequestsPerMinute: integer({
      tier: 'tuning',
      default: 60,
      min: 0,
      max: 1_000_000,
      description:
        '`GET /authorize` requests for a known client (a registered one, or a valid metadata document) per client address per minute, across replicas; then a 429 page with `Retry-After` (`0`: off). Requests naming no known client count towards `authorizeUnknownClientsPerMinute` instead.',
    }),
    authorizeUnknownClientsPerMinute: integer({
      tier: 'tuning',
      default: 60,
      min: 0,
      max: 1_000_000,
      description:
        '`GET /authorize` requests per client address per minute, across replicas, that name no known client (unknown or removed `client_id`, an unusable metadata document, none at all); then such requests get a 429 page with `Retry-After`. They never refuse a request for a known client (`0`: off).',
    }),
    pendingSignInsPerAddress: integer({
      tier: 'tuning',
      default: 100,
      min: 0,
      max: 1_000_000,
      description:
        'Sign-ins one client address may have pending at once (started at `/authorize`: a consent page shown, or the IdP step of a remembered consent; each kept 10 minutes); past it, `/authorize` answers a 429 page and stores nothing (`0`: no bound).',
    }),
    pendingSignInsPerClient: integer({
      tier: 'tuning',
      default: 10_000,
      min: 0,
      max: 10_000_000,
      description:
        'Sign-ins one client may have pending at once, from all addresses together; past it, `/authorize` answers a 429 page and stores nothing (`0`: no bound).',
    }),
    adminFailedAuthPerMinute: integer({
      tier: 'tuning',
      default: 20,
      min: 0,
      max: 1_000_000,
      description:
        'Failed master-token attempts per address per minute on the admin listener, across replicas; then further wrong tokens from that address get 429, the right one is still served (`0`: off).',
    }),
    ipv6PrefixLength: integer({
      tier: 'tuning',
      default: 64,
      min: 32,
      max: 128,
      description:
        'What every per-address limit counts an IPv6 client as: its network of this many bits (a home, a VM or a container host is given a whole `/64` and can send from any address in it; `128`: each address on its own). IPv4 addresses, and IPv4-mapped IPv6 ones (`::ffff:a.b.c.d`), count as the IPv4 address.',
    }),
  },
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

function checkMasterToken(token: string, label: string, problems: Problems): void {
  // Named by its variable wherever it was written: the file only ever refers to it (${BEARER_SECRET_MASTER}).
  const name = label === 'masterToken' ? 'BEARER_SECRET_MASTER' : label;
  if (token === '') {
    problems.push(`${name} is not set: ${GENERATE_HINT} and export it`);
  } else if (!isTokenShaped(token)) {
    problems.push(
      `${name} must be exactly 64 lowercase hex characters (32 random bytes); the value given has ${token.length} characters${/[A-F]/.test(token) ? ' and uppercase letters' : ''}; ${GENERATE_HINT}`,
    );
  } else {
    const weak = weakTokenReason(token);
    if (weak !== undefined) {
      problems.push(
        `${name} is not a random secret: ${weak}. A placeholder would let anyone who guesses it administer every token; ${GENERATE_HINT}`,
      );
    }
  }
}

function parseHttpUrl(name: string, value: string, problems: Problems): URL | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${name} "${value}" is not a valid URL (example: http://127.0.0.1:3000/mcp)`);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`${name} must be an http:// or https:// URL (got ${url.protocol})`);
    return undefined;
  }
  if (url.username || url.password) problems.push(`${name} must not carry credentials`);
  return url;
}

export function checkHttpUrl(name: string, value: string, problems: Problems, requirePath = false): void {
  const url = parseHttpUrl(name, value, problems);
  if (url !== undefined && requirePath && (url.pathname === '' || url.pathname === '/')) {
    problems.push(`${name} must name the MCP endpoint path, e.g. http://127.0.0.1:3000/mcp`);
  }
}

/** The base URL only: metadata and challenges append `/mcp` and `/.well-known/...` to it. */
function checkPublicUrl(name: string, value: string, problems: Problems): void {
  const url = parseHttpUrl(name, value, problems);
  if (url === undefined) return;
  if (url.search !== '' || url.hash !== '' || /[?#]/.test(value)) {
    problems.push(`${name} must be a base URL without a query or fragment (got "${value}")`);
  } else if (/\/mcp$/i.test(url.pathname)) {
    problems.push(
      `${name} is the base URL, without /mcp (the sidecar adds it; "${value}" would advertise ${value}/mcp): use ${url.origin}${url.pathname.slice(0, -4)}`,
    );
  }
}

/** A credential key: 32 bytes as 64 hex characters or base64 (the problem never repeats the value). */
function checkCredentialKey(key: string, label: string, problems: Problems): void {
  const parsed = parseCredentialKey(key);
  if (typeof parsed === 'string')
    problems.push(
      `${label} must be 32 random bytes as 64 hex characters or base64: ${parsed} (generate one with \`openssl rand -hex 32\`)`,
    );
}

/**
 * Headers the credential may not go in: those the proxy itself owns (framing, routing, the MCP
 * session, the identity headers it adds), where a credential would break or spoof the request.
 */
const RESERVED_CREDENTIAL_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-authorization',
  'cookie',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'content-type',
  'accept',
  'forwarded',
  'traceparent',
  'tracestate',
]);

function checkCredentialHeader(name: string, label: string, problems: Problems): void {
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) problems.push(`${label} "${name}" is not a valid header name`);
  else if (RESERVED_CREDENTIAL_HEADERS.has(name) || name.startsWith('x-mcp-auth-') || name.startsWith('x-forwarded-')) {
    problems.push(
      `${label} "${name}" is a header the proxy sets or forwards itself: name another one (authorization, or e.g. x-api-token)`,
    );
  }
}

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
