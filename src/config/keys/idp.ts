// The identity provider users sign in with, and the tokens of it the proxy accepts.

import { boolean, integer, list, structured, text, type KeyTree } from '../spec.ts';
import { readProviders } from './idp-providers.ts';
import { DEFAULT_IDP_ALGORITHMS, ASYMMETRIC_ALGORITHMS, checkHttpUrl } from './shared.ts';

export const IDP_KEYS = {
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
  providers: structured(
    'list of providers',
    {
      tier: 'tuning',
      // It holds client secrets: never from a command-line flag.
      secret: true,
      description:
        "Further identity providers, each `{name, issuer, clientId, clientSecret?, audience?, jwksUrl?, claims?, domains?}` (docs/identity-providers.md): each verifies its own tokens with its own keys, audience and claim rules (`claims`: emailVerifiedClaim, requireVerifiedEmail, groupsClaim, requiredGroup, allowedEmailDomains; unset ones are the `idp` section's). The IDP_* variables stay the provider named `default`. With several, the sign-in page asks which (an e-mail in `domains` chooses it), and a person is (issuer, subject).",
    },
    (raw, label, problems) => readProviders(raw, label, problems),
  ),
} satisfies KeyTree;
