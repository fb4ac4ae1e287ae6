// The links a user without a usable upstream credential is sent to (`PUBLIC_URL/connect/<link>`):
// bound to the MCP principal that was refused, short lived and single use. A link is a JWT (jose,
// HS256) under a key derived from the credential key, naming the principal (its IdP subject and
// issuer, when it was made); its `jti` is the elicitation id and is recorded (hashed) in the store
// when the link is used, so it works once. Reading a link (verify) does not use it up: only the
// person it names, confirming, does (redeem). A link made before its person was offboarded is refused.
// Behind an ingress, /authz hands the ingress a ticket of the same make (another audience, a minute,
// single use) that stands for the token it admitted and the request it was asked about, for the
// sidecar to take that request on without authenticating it again.

import { hkdfSync, randomBytes } from 'node:crypto';
import { jwtVerify, SignJWT, type JWTPayload } from 'jose';
import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import { revokedSince } from '../model/offboarding.ts';
import type { OneTimeValueStorage, SubjectCutoffStorage } from '../store/types.ts';

/** How long a link works: long enough to read a message and sign in, short enough to be useless later. */
export const CONNECT_LINK_TTL_MS = 10 * 60_000;
const AUDIENCE = 'mcp-bearer-proxy:connect';

/** How long a ticket works: the ingress hands it on at once, in the same client request. */
export const CONNECT_TICKET_TTL_MS = 60_000;
const TICKET_AUDIENCE = 'mcp-bearer-proxy:connect-answer';

/** A link or a ticket: which audience it is for, under which name its use is recorded, how long it lives. */
interface Kind {
  audience: string;
  used: string;
  ttlMs: number;
  refusal: string;
}
const LINK: Kind = {
  audience: AUDIENCE,
  used: 'connect-link',
  ttlMs: CONNECT_LINK_TTL_MS,
  refusal: 'this link is not valid (expired, altered or already used)',
};
const TICKET: Kind = {
  audience: TICKET_AUDIENCE,
  used: 'connect-answer',
  ttlMs: CONNECT_TICKET_TTL_MS,
  refusal: 'the ticket is not valid (expired, altered or already used)',
};

/** Whom a link was made for. */
export interface ConnectLinkClaims {
  subject: string;
  /** The issuer the subject is known by (IDP_ISSUER). */
  issuer: string;
  kind: Principal['kind'];
  clientId?: string;
  /** The link's id (the elicitation id the MCP client was given). */
  linkId: string;
  /** When the link was made (epoch ms). */
  issuedAt: number;
  expiresAt: number;
}

/**
 * What a ticket stands for: the token /authz admitted (by its hash, looked up again where the ticket
 * is used, so a token revoked meanwhile is refused and the principal is the token's as it stands) and
 * the request /authz was asked about (its method and presented MCP session), so that it takes on that
 * request and no other.
 */
export interface ConnectTicket {
  kind: Principal['kind'];
  subject: string;
  clientId?: string;
  /** SHA-256 of the token (hex), its store key. */
  tokenHash: string;
  /** The request's method, upper case. */
  method: string;
  /** SHA-256 (hex) of the MCP session id the request presented; undefined: none. */
  session?: string;
}

/** The link cannot be used: forged, altered, expired, already used. One answer for all (no oracle). */
export class ConnectLinkRefused extends Error {
  override readonly name = 'ConnectLinkRefused';
}

export class ConnectLinks {
  readonly #key: Uint8Array;
  readonly #clock: Clock;
  readonly #store: OneTimeValueStorage & Pick<SubjectCutoffStorage, 'subjectRevokedAt'>;
  readonly #issuer: string;
  readonly #issuers: string[];

  /**
   * `credentialKey`: the 32-byte credential key; links use a key derived from it, never the key itself.
   * `issuer`: the issuer of people whose token names none (IDP_ISSUER); `otherIssuers`: those of the
   * other identity providers. A link names its person's issuer beside the subject.
   */
  constructor(
    credentialKey: Buffer,
    clock: Clock,
    store: OneTimeValueStorage & Pick<SubjectCutoffStorage, 'subjectRevokedAt'>,
    issuer: string,
    otherIssuers: readonly string[] = [],
  ) {
    this.#key = new Uint8Array(hkdfSync('sha256', credentialKey, Buffer.alloc(0), 'mcp-bearer-proxy connect links v1', 32));
    this.#clock = clock;
    this.#store = store;
    this.#issuer = issuer;
    this.#issuers = [issuer, ...otherIssuers.filter((i) => i !== issuer)];
  }

  /** A new link for `principal`: its path segment and its id. */
  async mint(principal: Principal): Promise<{ link: string; linkId: string }> {
    const linkId = randomBytes(16).toString('hex');
    return { link: await this.#sign(LINK, principal, linkId), linkId };
  }

  /** Checks a link without using it up (a link already used passes here: redeem refuses it); throws ConnectLinkRefused. */
  async verify(link: string): Promise<ConnectLinkClaims> {
    return (await this.#verify(LINK, link)).claims;
  }

  /** Checks a link and uses it up (a second use is refused, on every replica); throws ConnectLinkRefused. */
  async redeem(link: string): Promise<ConnectLinkClaims> {
    return (await this.#redeem(LINK, link)).claims;
  }

  /**
   * A ticket for `principal` (admitted with the token of hash `principal.tokenHash`), refused by /authz
   * for want of a credential on `request`: the ingress hands it, with the request, to the sidecar, which
   * takes that request on. Not a link: it cannot start a connection.
   */
  ticket(principal: Principal, request: { method: string; session: string | undefined }): Promise<string> {
    if (principal.tokenHash === undefined) throw new Error('a ticket stands for a token');
    const bound: Record<string, string> = { th: principal.tokenHash, htm: request.method.toUpperCase() };
    if (request.session !== undefined) bound.sid = request.session;
    return this.#sign(TICKET, principal, randomBytes(16).toString('hex'), bound);
  }

  /** What a ticket stands for, using it up; throws ConnectLinkRefused (forged, altered, expired, used, a link). */
  async redeemTicket(ticket: string): Promise<ConnectTicket> {
    const { claims, payload } = await this.#redeem(TICKET, ticket);
    if (typeof payload.th !== 'string' || typeof payload.htm !== 'string' || (payload.sid !== undefined && typeof payload.sid !== 'string'))
      throw new ConnectLinkRefused(TICKET.refusal);
    const redeemed: ConnectTicket = { kind: claims.kind, subject: claims.subject, tokenHash: payload.th, method: payload.htm };
    if (claims.clientId !== undefined) redeemed.clientId = claims.clientId;
    if (typeof payload.sid === 'string') redeemed.session = payload.sid;
    return redeemed;
  }

  #sign(kind: Kind, principal: Principal, id: string, extra: Record<string, string> = {}): Promise<string> {
    const now = this.#clock.now();
    return new SignJWT({ ...extra, kind: principal.kind, ...(principal.clientId !== undefined ? { cid: principal.clientId } : {}) })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(principal.subject)
      .setIssuer(principal.issuer ?? this.#issuer)
      .setAudience(kind.audience)
      .setJti(id)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor((now + kind.ttlMs) / 1000))
      .sign(this.#key);
  }

  async #verify(kind: Kind, token: string): Promise<{ claims: ConnectLinkClaims; payload: JWTPayload }> {
    let claims: ConnectLinkClaims;
    let payload: JWTPayload;
    try {
      if (token.length > 2048) throw new Error('too long');
      ({ payload } = await jwtVerify(token, this.#key, {
        algorithms: ['HS256'],
        audience: kind.audience,
        issuer: this.#issuers,
        currentDate: new Date(this.#clock.now()),
        clockTolerance: 0,
      }));
      if (
        typeof payload.sub !== 'string' ||
        typeof payload.jti !== 'string' ||
        typeof payload.exp !== 'number' ||
        typeof payload.iat !== 'number'
      )
        throw new Error('claims');
      if (payload.kind !== 'user' && payload.kind !== 'oauth') throw new Error('kind');
      claims = {
        subject: payload.sub,
        issuer: payload.iss!,
        kind: payload.kind,
        linkId: payload.jti,
        issuedAt: payload.iat * 1000,
        expiresAt: payload.exp * 1000,
      };
      if (typeof payload.cid === 'string') claims.clientId = payload.cid;
    } catch (err) {
      throw new ConnectLinkRefused(kind.refusal, { cause: err });
    }
    // Made for a person offboarded since (iat is in whole seconds: a link of the cut-off's second counts as before it).
    if (await revokedSince(this.#store, claims, claims.issuedAt)) throw new ConnectLinkRefused(kind.refusal);
    return { claims, payload };
  }

  async #redeem(kind: Kind, token: string): Promise<{ claims: ConnectLinkClaims; payload: JWTPayload }> {
    const verified = await this.#verify(kind, token);
    const { claims } = verified;
    if (!(await this.#store.useOnce(`${kind.used}:${claims.linkId}`, claims.expiresAt))) throw new ConnectLinkRefused(kind.refusal);
    return verified;
  }
}
