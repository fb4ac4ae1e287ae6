// The proxy's own OAuth authorization server: clients, lifetimes, consent and sign-in.

import { boolean, choice, integer, list, type KeyTree } from '../spec.ts';
import { profileLifetimes } from './shared.ts';

export const OAUTH_KEYS = {
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
} satisfies KeyTree;
