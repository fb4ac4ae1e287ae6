// The links a user without a usable upstream credential is sent to (`PUBLIC_URL/connect/<link>`):
// bound to the MCP principal that was refused, short lived and single use. A link is a JWT (jose,
// HS256) under a key derived from the credential key, naming the principal (its IdP subject and
// issuer, when it was made); its `jti` is the elicitation id and is recorded (hashed) in the store
// when the link is used, so it works once. Reading a link (verify) does not use it up: only the
// person it names, confirming, does (redeem). A link made before its person was offboarded is refused.
// Behind an ingress, /authz hands the ingress a ticket of the same make (another audience, a minute,
// single use) that stands for the principal it refused, for the sidecar to answer the request with a
// link without authenticating it again.

import { hkdfSync, randomBytes } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import { voidedByRevocation } from '../model/offboarding.ts';
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

/** The link cannot be used: forged, altered, expired, already used. One answer for all (no oracle). */
export class ConnectLinkRefused extends Error {
  override readonly name = 'ConnectLinkRefused';
}

export class ConnectLinks {
  readonly #key: Uint8Array;
  readonly #clock: Clock;
  readonly #store: OneTimeValueStorage & Pick<SubjectCutoffStorage, 'subjectRevokedAt'>;
  readonly #issuer: string;

  /**
   * `credentialKey`: the 32-byte credential key; links use a key derived from it, never the key itself.
   * `issuer`: the issuer users are known by (IDP_ISSUER), named in every link beside the subject.
   */
  constructor(
    credentialKey: Buffer,
    clock: Clock,
    store: OneTimeValueStorage & Pick<SubjectCutoffStorage, 'subjectRevokedAt'>,
    issuer: string,
  ) {
    this.#key = new Uint8Array(hkdfSync('sha256', credentialKey, Buffer.alloc(0), 'mcp-bearer-proxy connect links v1', 32));
    this.#clock = clock;
    this.#store = store;
    this.#issuer = issuer;
  }

  /** A new link for `principal`: its path segment and its id. */
  async mint(principal: Principal): Promise<{ link: string; linkId: string }> {
    const linkId = randomBytes(16).toString('hex');
    return { link: await this.#sign(LINK, principal, linkId), linkId };
  }

  /** Checks a link without using it up (a link already used passes here: redeem refuses it); throws ConnectLinkRefused. */
  verify(link: string): Promise<ConnectLinkClaims> {
    return this.#verify(LINK, link);
  }

  /** Checks a link and uses it up (a second use is refused, on every replica); throws ConnectLinkRefused. */
  redeem(link: string): Promise<ConnectLinkClaims> {
    return this.#redeem(LINK, link);
  }

  /**
   * A ticket for `principal`, refused by /authz for want of a credential: the ingress hands it, with
   * the request, to the sidecar, which answers it with a link. Not a link: it cannot start a connection.
   */
  ticket(principal: Principal): Promise<string> {
    return this.#sign(TICKET, principal, randomBytes(16).toString('hex'));
  }

  /** The principal a ticket stands for, using it up; throws ConnectLinkRefused (forged, altered, expired, used, a link). */
  async redeemTicket(ticket: string): Promise<Principal> {
    const claims = await this.#redeem(TICKET, ticket);
    return { kind: claims.kind, subject: claims.subject, ...(claims.clientId !== undefined ? { clientId: claims.clientId } : {}) };
  }

  #sign(kind: Kind, principal: Principal, id: string): Promise<string> {
    const now = this.#clock.now();
    return new SignJWT({ kind: principal.kind, ...(principal.clientId !== undefined ? { cid: principal.clientId } : {}) })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(principal.subject)
      .setIssuer(this.#issuer)
      .setAudience(kind.audience)
      .setJti(id)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor((now + kind.ttlMs) / 1000))
      .sign(this.#key);
  }

  async #verify(kind: Kind, token: string): Promise<ConnectLinkClaims> {
    let claims: ConnectLinkClaims;
    try {
      if (token.length > 2048) throw new Error('too long');
      const { payload } = await jwtVerify(token, this.#key, {
        algorithms: ['HS256'],
        audience: kind.audience,
        issuer: this.#issuer,
        currentDate: new Date(this.#clock.now()),
        clockTolerance: 0,
      });
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
        issuer: this.#issuer,
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
    if (voidedByRevocation(await this.#store.subjectRevokedAt(claims.subject, claims.issuer), claims.issuedAt))
      throw new ConnectLinkRefused(kind.refusal);
    return claims;
  }

  async #redeem(kind: Kind, token: string): Promise<ConnectLinkClaims> {
    const claims = await this.#verify(kind, token);
    if (!(await this.#store.useOnce(`${kind.used}:${claims.linkId}`, claims.expiresAt))) throw new ConnectLinkRefused(kind.refusal);
    return claims;
  }
}
