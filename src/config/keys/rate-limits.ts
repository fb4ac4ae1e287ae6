// Rate limits and quotas: what each principal and address may spend, and how addresses are counted.

import { integer, type KeyTree } from '../spec.ts';

export const RATE_LIMIT_KEYS = {
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
} satisfies KeyTree;
