// Every admin operation, declared once: what it does, its fields (type, bounds, required or not, the
// CLI flag), what it answers and how the CLI shows that. The admin listener reads a body against it
// (src/admin/operations.ts), the CLI builds its flags and help from it (src/entry/cli.ts), and the table of
// operations in docs/admin.md is generated from it (scripts/admin-doc.ts, `npm run docs:admin`).

import type { TokenEndpointAuthMethod } from '../model/records.ts';
import { choice, hex64, integer, list, metadata, object, operation, scope, text, type Field } from './spec.ts';
import { table, time } from './render.ts';

export const MAX_LIFETIME_SECONDS = 31_536_000;
export const MAX_AUDIT_EVENTS = 1000;
export const MAX_GRANTS_PER_PAGE = 1000;

const clientId = () => text({ description: 'the client', required: true, min: 1, max: 128, rule: 'a non-empty string' });
const token = () => hex64({ description: 'the token; `-` reads it from stdin (keeps it out of ps)', stdin: true });
const tokenHash = () => hex64({ description: 'its SHA-256 (see `token hash`)' });
/** An IdP `sub` (OpenID Connect bounds it to 255 ASCII characters; a little room for other IdPs). */
function subject(o: { description: string; required: true }): Field<string>;
function subject(o: { description: string }): Field<string | undefined>;
function subject(o: { description: string; required?: boolean }): Field<string | undefined> {
  return text({ ...o, min: 1, max: 1024, rule: 'a non-empty string of at most 1024 characters' } as Parameters<typeof text>[0] & {
    required?: false;
  });
}

export const ADMIN_OPERATIONS = {
  createClient: operation({
    description: 'create an OAuth client; its secret is shown once',
    fields: {
      // The client metadata fields, with the rules /register and metadata documents share (src/model/client-metadata.ts).
      clientName: metadata('clientName', { description: 'a name for people', aliases: ['name'] }),
      redirectUris: metadata('redirectUris', {
        description: 'redirect URIs (repeat the flag, or comma-separate)',
        aliases: ['redirect-uri'],
      }),
      grantTypes: metadata('grantTypes', {
        description: 'e.g. client_credentials,refresh_token (default: from the profile)',
        aliases: ['grant-type'],
      }),
      scope: scope({ description: 'space-separated scopes the client may ask for' }),
      profile: metadata('profile', { description: 'token profile (default: default)' }),
      tokenEndpointAuthMethod: metadata('tokenEndpointAuthMethod', { description: 'how the client authenticates at /token' }),
      jwks: metadata('jwks', { description: 'private_key_jwt: its public keys, a JSON Web Key Set' }),
      jwksUri: metadata('jwksUri', { description: 'private_key_jwt: an https URL of its public keys (instead of jwks)' }),
    },
    answer: '`201 {clientId, clientSecret, ...}` (secret shown once)',
  }),

  listClients: operation({
    description: 'list OAuth clients (no secrets)',
    fields: {},
    answer: '`200 {clients:[...]}` (no secrets, no hashes; deleted clients show `revokedAt`)',
    render: (body: { clients: Array<Record<string, unknown>> }) =>
      table(
        ['CLIENT ID', 'NAME', 'SOURCE', 'PROFILE', 'GRANTS', 'CREATED', 'REVOKED'],
        body.clients.map((c) => [
          c.clientId,
          c.clientName,
          c.source,
          c.profile,
          (c.grantTypes as string[]).join(','),
          time(c.createdAt),
          time(c.revokedAt),
        ]),
      ),
  }),

  deleteClient: operation({
    description: 'revoke a client and every token it has, atomically',
    fields: { clientId: clientId() },
    answer: '`200 {clientId, revokedAt, accessTokensRevoked, refreshTokensRevoked}`; idempotent',
  }),

  seedDefaultProfiles: operation({
    description: 'create the default token profiles that do not exist yet',
    fields: {},
    answer: '`200 {profiles:[...], created:[names]}`',
    render: (body: { created: string[]; profiles: Array<Record<string, unknown>> }) =>
      `created: ${body.created.length > 0 ? body.created.join(', ') : '(none, all existed)'}\n` +
      table(
        ['PROFILE', 'ACCESS TTL (s)', 'REFRESH TTL (s)', 'GRANTS'],
        body.profiles.map((p) => [
          p.name,
          p.accessTokenLifetimeSeconds,
          p.refreshTokenLifetimeSeconds,
          (p.grantTypes as string[]).join(','),
        ]),
      ),
  }),

  createAccessToken: operation({
    description: 'issue an OAuth access token for a client; shown once',
    fields: {
      clientId: clientId(),
      lifetimeSeconds: integer({ description: 'its lifetime in seconds', required: true, min: 1, max: MAX_LIFETIME_SECONDS }),
      scope: scope({ description: 'space-separated scopes' }),
    },
    answer: '`201 {accessToken, tokenType:"Bearer", expiresAt, expiresIn, clientId}`; for a deleted client `400`, an unknown one `404`',
  }),

  revokeUserToken: operation({
    description: 'revoke a user-grade token, by the token or its SHA-256',
    fields: { token: token(), tokenHash: tokenHash() },
    exactlyOne: [['token', 'tokenHash']],
    answer: '`200 {tokenHash, revoked:true}`; `404` when unknown',
  }),

  listGrants: operation({
    description:
      'the grants a person (IdP `sub`) or a client holds: one per refresh family, standalone access token or user-grade token (no token, no hash)',
    fields: {
      subject: subject({ description: 'the IdP `sub` whose grants to list' }),
      issuer: text({
        description: "only the grants of this IdP issuer's people (a person is the subject at an issuer)",
        min: 1,
        max: 2048,
        rule: 'a non-empty string of at most 2048 characters',
      }),
      clientId: text({
        description: 'only the grants this client holds',
        min: 1,
        max: 128,
        rule: 'a non-empty string of at most 128 characters',
      }),
      limit: integer({ description: 'grants per page', min: 1, max: MAX_GRANTS_PER_PAGE, default: 100 }),
      cursor: text({
        description: "the previous page's `nextCursor`: the page after it",
        min: 1,
        max: 200,
        rule: 'the nextCursor of a previous page',
      }),
    },
    atLeastOne: [['subject', 'clientId']],
    answer:
      '`200 {grants:[{grantId, subject, clientId, clientName, scope, createdAt, lastUsedAt, expiresAt}], nextCursor?}`, in grant id order, `limit` at a time; `nextCursor` while more follow (pass it as `cursor`: grants made or ended meanwhile never shift a page); an unknown client `404`, a cursor not given by this operation `400`',
    render: (body: { grants: Array<Record<string, unknown>>; nextCursor?: string }) =>
      table(
        ['GRANT', 'SUBJECT', 'CLIENT', 'NAME', 'SCOPE', 'CREATED', 'LAST USED', 'EXPIRES'],
        body.grants.map((g) => [
          g.grantId,
          g.subject,
          g.clientId,
          g.clientName,
          g.scope,
          time(g.createdAt),
          time(g.lastUsedAt),
          time(g.expiresAt),
        ]),
      ) + (body.nextCursor === undefined ? '' : `more follow: the next page with --cursor ${body.nextCursor}\n`),
  }),

  revokeSubject: operation({
    description: 'offboard a person: revoke every token, approval and session handle an IdP `sub` holds, at once',
    fields: {
      subject: subject({ description: 'the IdP `sub`', required: true }),
      issuer: text({
        description:
          "only what this IdP issuer's subject holds; with several identity providers configured it must be given (400 without it); with one, default any issuer",
        min: 1,
        max: 2048,
        rule: 'a non-empty string of at most 2048 characters',
      }),
    },
    answer:
      '`200 {subject, accessTokensRevoked, refreshTokensRevoked, userTokensRevoked, consentsForgotten, connectedAccountsDeleted, handlesForgotten, approvalsCancelled}`; open streams end; a second call counts zeros',
  }),

  rebuildSubjectIndex: operation({
    description: 'index records written before the per-person index existed (SCAN in batches; idempotent)',
    fields: {},
    answer: '`200 {scanned, indexed}`',
  }),

  explainPolicy: operation({
    description: 'dry run of the per-tool policy: what a call with this token would get, and which rule decides',
    fields: {
      token: token(),
      tokenHash: tokenHash(),
      method: text({
        description: 'the JSON-RPC method, e.g. tools/call',
        required: true,
        min: 1,
        max: 256,
        rule: 'a JSON-RPC method name',
      }),
      name: text({ description: 'the tool or prompt name, or the resource URI', max: 4096, rule: 'a string' }),
      arguments: object({ description: "a tools/call's arguments (JSON), for rules with argument conditions" }),
      address: text({ description: 'the client address, for a quota counted per address', max: 64, rule: 'an IP address' }),
    },
    exactlyOne: [['token', 'tokenHash']],
    answer:
      '`200 {effect, decidedBy, rule?, reason, scope?, conditions?, passedOver?, principal, quota?}`: a dry run of the per-tool policy ([`policy.md`](policy.md)) for the token as it stands in the store, with the quota that counts the call and what is left of it ([`quotas.md`](quotas.md))',
    render: (body: {
      effect: string;
      decidedBy: string;
      rule?: string;
      reason: string;
      scope?: string;
      conditions?: string[];
      passedOver?: { rule: string; condition: string }[];
      quota?: { rule: string; per: string; limit: number; windowSeconds: number; remaining?: number; resetAt?: string };
    }) =>
      `${body.effect.toUpperCase()}: ${body.reason}${body.conditions ? `\nconditions held: ${body.conditions.join('; ')}` : ''}${(body.passedOver ?? []).map((o) => `\npassed over "${o.rule}": ${o.condition}`).join('')}${body.scope ? `\nstep-up: a token with scope "${body.scope}" would be allowed` : ''}${
        body.quota
          ? `\nquota "${body.quota.rule}": ${body.quota.limit} per ${body.quota.windowSeconds} s per ${body.quota.per}${body.quota.remaining !== undefined ? `, ${body.quota.remaining} left until ${body.quota.resetAt}` : ''}`
          : ''
      }\n`,
  }),

  reencryptUpstreamCredentials: operation({
    description: 'rewrite every kept upstream credential under UPSTREAM_CREDENTIALS_KEY (after a rotation, before retiring the old key)',
    fields: {},
    answer:
      '`200 {rewritten, alreadyCurrent, unreadable, changedMeanwhile}` (counts, never a token); `400` when upstream credentials are off',
    render: (body: { rewritten: number; alreadyCurrent: number; unreadable: number; changedMeanwhile: number }) =>
      `rewritten: ${body.rewritten}, already under the current key: ${body.alreadyCurrent}, unreadable (left as they are): ${body.unreadable}, replaced meanwhile: ${body.changedMeanwhile}\n`,
  }),

  listApprovals: operation({
    description: 'calls held for approval (docs/approval.md), newest first: pending, decided, used or expired',
    fields: {
      state: choice(['pending', 'approved', 'denied', 'used', 'expired'], { description: 'only approvals in this state' }),
      subject: subject({ description: "only this IdP `sub`'s calls" }),
    },
    answer:
      '`200 {approvals:[{approvalId, subject, issuer?, clientId?, tool, argumentsDigest, state, requestedAt, decidedBy?, decidedAt?, expiresAt}]}`: never the arguments themselves',
    render: (body: { approvals: Array<Record<string, unknown>> }) =>
      table(
        ['APPROVAL', 'STATE', 'SUBJECT', 'CLIENT', 'TOOL', 'REQUESTED', 'EXPIRES', 'DECIDED BY'],
        body.approvals.map((a) => [
          a.approvalId,
          a.state,
          a.subject,
          a.clientId,
          a.tool,
          time(a.requestedAt),
          time(a.expiresAt),
          a.decidedBy,
        ]),
      ),
  }),

  decideApproval: operation({
    description: 'approve or deny a held call as the admin (the approval page is where a person does)',
    fields: {
      approvalId: text({ description: 'the approval', required: true, min: 32, max: 32, rule: '32 lowercase hex characters' }),
      decision: choice(['approve', 'deny'], { description: 'approve or deny (must be given)' }),
      reason: text({ description: 'why, shown to the caller on a denial', max: 500, rule: 'at most 500 characters' }),
    },
    answer: '`200 {approvalId, state}`; `404` for an unknown approval, `400` for one no longer pending',
  }),

  listAuditEvents: operation({
    description: 'the newest audit events, newest first',
    fields: { count: integer({ description: 'how many', min: 1, max: MAX_AUDIT_EVENTS, default: 100 }) },
    answer: '`200 {events:[...]}`, newest first (empty when `audit.stream` is off)',
    render: (body: { events: Array<Record<string, unknown>> }) =>
      table(
        ['TIME', 'WHO', 'ACTION', 'RESULT', 'CLIENT', 'TOKEN', 'DETAIL'],
        body.events.map((e) => [
          time(e.at),
          e.who,
          e.action,
          e.result,
          e.clientId,
          e.tokenHashPrefix ?? e.subject,
          e.detail === undefined
            ? ''
            : Object.entries(e.detail as Record<string, unknown>)
                .map(([k, v]) => `${k}=${String(v)}`)
                .join(' '),
        ]),
      ),
  }),
};

export type OperationName = keyof typeof ADMIN_OPERATIONS;
