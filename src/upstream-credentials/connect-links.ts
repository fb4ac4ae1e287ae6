// The links a user without a usable upstream credential is sent to (`PUBLIC_URL/connect/<link>`):
// bound to the MCP principal that was refused, short lived and single use. A link is a JWT (jose,
// HS256) under a key derived from the credential key, naming the principal (its IdP subject and
// issuer, when it was made); its `jti` is the elicitation id and is recorded (hashed) in the store
// when the link is used, so it works once. Reading a link (verify) does not use it up: only the
// person it names, confirming, does (redeem).

import { hkdfSync, randomBytes } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import type { OneTimeValueStorage } from '../store/types.ts';

/** How long a link works: long enough to read a message and sign in, short enough to be useless later. */
export const CONNECT_LINK_TTL_MS = 10 * 60_000;
const AUDIENCE = 'mcp-bearer-proxy:connect';

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
  readonly #used: OneTimeValueStorage;
  readonly #issuer: string;

  /**
   * `credentialKey`: the 32-byte credential key; links use a key derived from it, never the key itself.
   * `issuer`: the issuer users are known by (IDP_ISSUER), named in every link beside the subject.
   */
  constructor(credentialKey: Buffer, clock: Clock, used: OneTimeValueStorage, issuer: string) {
    this.#key = new Uint8Array(hkdfSync('sha256', credentialKey, Buffer.alloc(0), 'mcp-bearer-proxy connect links v1', 32));
    this.#clock = clock;
    this.#used = used;
    this.#issuer = issuer;
  }

  /** A new link for `principal`: its path segment and its id. */
  async mint(principal: Principal): Promise<{ link: string; linkId: string }> {
    const linkId = randomBytes(16).toString('hex');
    const now = this.#clock.now();
    const link = await new SignJWT({ kind: principal.kind, ...(principal.clientId !== undefined ? { cid: principal.clientId } : {}) })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(principal.subject)
      .setIssuer(this.#issuer)
      .setAudience(AUDIENCE)
      .setJti(linkId)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor((now + CONNECT_LINK_TTL_MS) / 1000))
      .sign(this.#key);
    return { link, linkId };
  }

  /** Checks a link without using it up (a link already used passes here: redeem refuses it); throws ConnectLinkRefused. */
  async verify(link: string): Promise<ConnectLinkClaims> {
    try {
      if (link.length > 2048) throw new Error('too long');
      const { payload } = await jwtVerify(link, this.#key, {
        algorithms: ['HS256'],
        audience: AUDIENCE,
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
      const claims: ConnectLinkClaims = {
        subject: payload.sub,
        issuer: this.#issuer,
        kind: payload.kind,
        linkId: payload.jti,
        issuedAt: payload.iat * 1000,
        expiresAt: payload.exp * 1000,
      };
      if (typeof payload.cid === 'string') claims.clientId = payload.cid;
      return claims;
    } catch (err) {
      throw new ConnectLinkRefused('this link is not valid (expired, altered or already used)', { cause: err });
    }
  }

  /** Checks a link and uses it up (a second use is refused, on every replica); throws ConnectLinkRefused. */
  async redeem(link: string): Promise<ConnectLinkClaims> {
    const claims = await this.verify(link);
    if (!(await this.#used.useOnce(`connect-link:${claims.linkId}`, claims.expiresAt)))
      throw new ConnectLinkRefused('this link is not valid (expired, altered or already used)');
    return claims;
  }
}
