// The credential model: token format (64 lowercase hex), SHA-256 hashing, the master-token check, and the policy that
// decides whether a stored record (as the store returns it, parsed, or `'corrupt'`) still authorizes.
// The store knows nothing of expiry or revocation; this module knows nothing of Redis nor of stored fields.

import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { clientBucket, hashBucket } from './buckets.ts';
import type { StoredAccessToken, StoredRefreshToken, StoredUserToken, TokenLookup } from './records.ts';

export type { TokenLookup } from './records.ts';

/** 7 × 24 × 60 × 60 × 1000 ms: the fixed lifetime of a user-grade token (not configurable). */
export const TTL_7_DAYS = 7 * 24 * 60 * 60 * 1000;
export const TOKEN_HEX_LENGTH = 64;
const TOKEN_PATTERN = /^[0-9a-f]{64}$/;
const EPOCH_MS_PATTERN = /^[0-9]{1,16}$/;

export type AuthKind = 'user' | 'oauth' | 'master';

export interface Principal {
  kind: AuthKind;
  /** IdP `sub` (user, or oauth from interactive sign-in), clientId (oauth from client_credentials) or `master`. */
  subject: string;
  /** The IdP issuer of the person, as the token's record names it (absent: a machine token, or a record written before issuers were kept). */
  issuer?: string;
  clientId?: string;
  tokenHash?: string;
  scope?: string;
  expiresAt?: number;
  /** The refresh-token family an OAuth access token was issued with (revoked together). */
  familyId?: string;
  /** The IdP user's email and groups as the ID token (sign-in) or the exchanged JWT had them at issuance. */
  email?: string;
  groups?: readonly string[];
  /** The thumbprint (RFC 7638) of the key the token is bound to (DPoP, RFC 9449 `cnf.jkt`); absent: unbound. */
  dpopJkt?: string;
}

/** Why a presented credential was refused; never sent to the client (one body for all), only logged. */
export type DenialReason = 'missing' | 'malformed' | 'unknown' | 'revoked' | 'expired' | 'corrupt' | DpopDenialReason;

/**
 * DPoP refusals: `dpop_proof` a proof missing, malformed or not for this request; `dpop_replay` a proof
 * used before; `dpop_binding` a token presented other than as its binding says (a bound token as Bearer
 * or with another key, an unbound one as DPoP, any unbound one where DPoP is required).
 */
export type DpopDenialReason = 'dpop_proof' | 'dpop_replay' | 'dpop_binding';

export type Decision = { ok: true; principal: Principal } | { ok: false; reason: DenialReason };

/** 32 CSPRNG bytes as 64 lowercase hex characters. */
export function generateToken(): string {
  return randomBytes(32).toString('hex');
}

/**
 * A token whose records go in a client's bucket (access and refresh tokens, authorization codes):
 * 32 CSPRNG bytes drawn until the SHA-256 of their hex begins with the client's bucket (256 draws on
 * average). The token is uniform over the 2^248 values that land there: 248 bits stay random, and
 * the lookup finds the bucket from the token's hash alone (docs/storage.md).
 */
export function generateTokenFor(clientId: string): string {
  const bucket = clientBucket(clientId);
  // CSPRNG bytes drawn 64 candidates at a time (one call instead of one per draw); every candidate
  // is 32 fresh bytes, and none is used twice.
  for (;;) {
    const pool = randomBytes(32 * 64);
    for (let at = 0; at < pool.length; at += 32) {
      const raw = pool.toString('hex', at, at + 32);
      if (hashBucket(hashToken(raw)) === bucket) return raw;
    }
  }
}

/** SHA-256 of the raw token as 64 lowercase hex: the only form of an issued token that is ever stored. */
export function hashToken(raw: string): string {
  return hash('sha256', raw, 'hex');
}

export function isTokenShaped(value: string): boolean {
  return value.length === TOKEN_HEX_LENGTH && TOKEN_PATTERN.test(value);
}

/** Fewer different hex digits than this in 64 is a made-up value (random: ~15.7; below 8: p < 1e-18). */
const MIN_DISTINCT_HEX_DIGITS = 8;

/**
 * Why a token-shaped value is clearly not 32 random bytes (a placeholder such as all zeros, one
 * repeated character, a short repeated pattern), or undefined when nothing gives it away. A random
 * token fails this with a probability below 1e-18. The reason never quotes the value.
 */
export function weakTokenReason(token: string): string | undefined {
  const distinct = new Set(token).size;
  if (distinct < MIN_DISTINCT_HEX_DIGITS) {
    return `it uses only ${distinct} different hex digit${distinct === 1 ? '' : 's'} (a random one uses about 16)`;
  }
  for (let period = 1; period <= token.length / 2; period++) {
    if (token.length % period === 0 && token.slice(period) === token.slice(0, -period)) {
      return `it is a ${period}-character pattern repeated`;
    }
  }
  return undefined;
}

/** `bearer`: RFC 6750; `dpop`: RFC 9449 §7.1, a token bound to a key, presented with a proof. */
export type AuthorizationScheme = 'bearer' | 'dpop';

export type ParsedAuthorization =
  { kind: 'missing' } | { kind: 'malformed' } | { kind: 'token'; token: string; scheme: AuthorizationScheme };

const MISSING: ParsedAuthorization = { kind: 'missing' };
const MALFORMED: ParsedAuthorization = { kind: 'malformed' };

/**
 * Strict `Authorization: Bearer <64 lowercase hex>` or `Authorization: DPoP <64 lowercase hex>`. The
 * scheme is case-insensitive (RFC 9110 §11.1), separated by exactly one space; anything else (other
 * schemes, padding, a second header) is malformed. `rawHeaders` is scanned because Node keeps only the
 * first of duplicate Authorization headers.
 */
export function parseAuthorization(rawHeaders: readonly string[]): ParsedAuthorization {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      if (value !== undefined) return MALFORMED;
      value = rawHeaders[i + 1] ?? '';
    }
  }
  if (value === undefined) return MISSING;
  let scheme: AuthorizationScheme;
  if (value.length === 7 + TOKEN_HEX_LENGTH && value.slice(0, 6).toLowerCase() === 'bearer') scheme = 'bearer';
  else if (value.length === 5 + TOKEN_HEX_LENGTH && value.slice(0, 4).toLowerCase() === 'dpop') scheme = 'dpop';
  else return MALFORMED;
  const separator = scheme === 'bearer' ? 6 : 4;
  if (value.charCodeAt(separator) !== 0x20) return MALFORMED;
  const token = value.slice(separator + 1);
  return TOKEN_PATTERN.test(token) ? { kind: 'token', token, scheme } : MALFORMED;
}

/** The two primitives of the master-token check. Production uses node:crypto; a test may pass wrappers to observe the path taken. */
export interface MasterTokenPrimitives {
  /** SHA-256 of `text` (UTF-8): 32 bytes. */
  sha256(text: string): Buffer;
  /** Constant-time comparison of two equally long buffers. */
  equal(a: Buffer, b: Buffer): boolean;
}

const NODE_CRYPTO: MasterTokenPrimitives = Object.freeze({
  sha256: (text: string) => hash('sha256', text, 'buffer'),
  equal: (a: Buffer, b: Buffer) => timingSafeEqual(a, b),
});

/**
 * Constant-time master-token check without a length leak: both sides are reduced to their SHA-256
 * (always 32 bytes), then compared with timingSafeEqual. Every candidate, whatever its length, prefix
 * or type, takes the same path: one digest of the whole candidate, one comparison.
 * The proxy's hot path has the candidate's SHA-256 already (it is the store key), so it uses
 * `matchesHash` and hashes each request once; the comparison is the same.
 */
export class MasterToken {
  readonly #digest: Buffer;
  readonly #crypto: MasterTokenPrimitives;

  constructor(secret: string, primitives: MasterTokenPrimitives = NODE_CRYPTO) {
    if (!isTokenShaped(secret)) throw new Error('master token must be exactly 64 lowercase hex characters');
    this.#crypto = primitives;
    this.#digest = primitives.sha256(secret);
  }

  matches(candidate: unknown): boolean {
    const text = typeof candidate === 'string' ? candidate : '';
    return this.#crypto.equal(this.#crypto.sha256(text), this.#digest);
  }

  /** Same check for a candidate already reduced by `hashToken` (64 lowercase hex of its SHA-256). */
  matchesHash(tokenHash: string): boolean {
    if (!isTokenShaped(tokenHash)) throw new Error('matchesHash expects the output of hashToken');
    return this.#crypto.equal(Buffer.from(tokenHash, 'hex'), this.#digest);
  }
}

/** A stored timestamp: integer epoch ms of at most 16 digits, nothing else (fail closed). */
export function parseEpochMs(value: string | undefined): number | undefined {
  if (value === undefined || !EPOCH_MS_PATTERN.test(value)) return undefined;
  return Number(value);
}

const CORRUPT: Decision = Object.freeze({ ok: false, reason: 'corrupt' });
const REVOKED: Decision = Object.freeze({ ok: false, reason: 'revoked' });
const EXPIRED: Decision = Object.freeze({ ok: false, reason: 'expired' });
const UNKNOWN: Decision = Object.freeze({ ok: false, reason: 'unknown' });

/**
 * Decides a token from its stored records, as the store parsed them: a record the store could not
 * read (`'corrupt'`), or a hash present in both collections, is refused as corrupt; else the token
 * authorizes while its record is not revoked and `expiresAt` is in the future.
 */
export function decideToken(tokenHash: string, found: TokenLookup, now: number, defaultIssuer?: string): Decision {
  const { user, oauth } = found;
  if (user === 'corrupt' || oauth === 'corrupt' || (user && oauth)) return CORRUPT;
  if (user) {
    if (user.revoked) return REVOKED;
    if (now >= user.expiresAt) return EXPIRED;
    const principal: Principal = { kind: 'user', subject: user.subject, tokenHash, expiresAt: user.expiresAt };
    return { ok: true, principal: withClaims(principal, user, defaultIssuer) };
  }
  if (oauth) {
    if (oauth.revoked) return REVOKED;
    if (now >= oauth.expiresAt) return EXPIRED;
    // Tokens from interactive sign-in act for the IdP user; machine tokens for their client.
    const { clientId } = oauth;
    const principal: Principal = { kind: 'oauth', subject: oauth.subject ?? clientId, clientId, tokenHash, expiresAt: oauth.expiresAt };
    if (oauth.scope !== undefined) principal.scope = oauth.scope;
    if (oauth.familyId !== undefined) principal.familyId = oauth.familyId;
    return { ok: true, principal: withClaims(principal, oauth, defaultIssuer) };
  }
  return UNKNOWN;
}

/** The key the token is bound to (DPoP) and the IdP user's email and groups as kept at issuance, for per-tool policy. */
function withClaims(principal: Principal, record: StoredUserToken | StoredAccessToken, defaultIssuer: string | undefined): Principal {
  if (record.dpopJkt !== undefined) principal.dpopJkt = record.dpopJkt;
  // A client_credentials token has no person, so no issuer; a sign-in token's record names both. A
  // person's record written before issuers were kept belongs to the IDP_* provider (`defaultIssuer`).
  const issuer = record.issuer ?? defaultIssuer;
  if (issuer !== undefined && principal.subject !== principal.clientId) principal.issuer = issuer;
  if (record.email !== undefined) principal.email = record.email;
  if (record.groups !== undefined) principal.groups = record.groups;
  return principal;
}

export type RefreshTokenState = 'usable' | 'rotated' | 'revoked' | 'expired';

/**
 * The state of a stored refresh token. `rotated` is not usable either, but the caller must still hand
 * it to the store's rotation, which answers a second use within the grace window with new tokens and
 * treats one after it as theft, revoking the whole family.
 */
export function refreshTokenState(token: StoredRefreshToken, now: number): RefreshTokenState {
  if (token.revokedAt !== undefined) return 'revoked';
  if (now >= token.expiresAt) return 'expired';
  return token.rotatedAt !== undefined ? 'rotated' : 'usable';
}

/**
 * Whether a refresh token rotated at `rotatedAt` (stored epoch ms) may still be presented again: a
 * parallel session of the client or a retried request within `graceMs` of the first rotation (the
 * store gives it one pair, once). The window is symmetric so that a replica whose clock runs behind the one that rotated cannot widen it. Anything
 * unparsable is outside it (fail closed: the family is revoked). The store's rotation (refreshUse)
 * applies it inside its atomic step.
 */
export function rotatedWithinGrace(rotatedAt: string, now: number, graceMs: number): boolean {
  const at = parseEpochMs(rotatedAt);
  if (at === undefined || graceMs <= 0) return false;
  return Math.abs(now - at) < graceMs;
}

/** The stored fields of a refresh token a rotation decides on (absent: null). */
export interface PresentedRefresh {
  readonly clientId: string | null;
  readonly revokedAt: string | null;
  readonly rotatedAt: string | null;
  readonly familyId: string | null;
}

/**
 * What presenting a refresh token of `clientId` in family `familyId` at `now` does: `invalid` (unknown,
 * another client's or family's, revoked), `reused` (rotated before the grace window: the family is to
 * be revoked), `grace` (rotated within it: nothing new, the sealed successor answers) or `rotate`.
 * The client's own state is checked after this, except for `reused` (a theft is answered whatever
 * became of the client).
 */
export function refreshUse(
  old: PresentedRefresh,
  clientId: string,
  familyId: string,
  now: number,
  graceMs: number,
): 'invalid' | 'reused' | 'grace' | 'rotate' {
  if (old.clientId === null || old.clientId !== clientId || old.revokedAt !== null || old.familyId !== familyId) return 'invalid';
  if (old.rotatedAt === null) return 'rotate';
  return rotatedWithinGrace(old.rotatedAt, now, graceMs) ? 'grace' : 'reused';
}

/** The stored fields of an authorization code a redemption decides on (absent: null). */
export interface PresentedCode {
  readonly clientId: string | null;
  readonly expiresAt: string | null;
  readonly redeemedAt: string | null;
}

/**
 * What redeeming a code for `clientId` at `now` does: `invalid` (unknown, another client's, expired),
 * `reused` (redeemed before: what that redemption issued is to be revoked, RFC 6749 §4.1.2), or
 * `redeem`. A redeemed code counts as reused even once past its expiry (it is kept for that).
 */
export function codeUse(code: PresentedCode, clientId: string, now: number): 'invalid' | 'reused' | 'redeem' {
  if (code.clientId === null || code.clientId !== clientId) return 'invalid';
  if (code.redeemedAt !== null) return 'reused';
  const expiresAt = code.expiresAt === null ? undefined : Number(code.expiresAt);
  return expiresAt !== undefined && Number.isFinite(expiresAt) && expiresAt > now ? 'redeem' : 'invalid';
}
