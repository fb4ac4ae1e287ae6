// The upstream MCP server: where requests go, how long they may take, and the credential each carries.

import { boolean, choice, integer, list, text, type KeyTree } from '../spec.ts';
import { CREDENTIAL_MODES, checkHttpUrl, checkCredentialKey, checkCredentialHeader } from './shared.ts';

export const UPSTREAM_KEYS = {
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
    description: 'A generated signing key is replaced this often; the next one is listed in the JWKS two minutes before it signs anything.',
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
} satisfies KeyTree;
