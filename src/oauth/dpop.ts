// DPoP proofs (RFC 9449): the check of a `DPoP` header at /token and at the resource (/mcp, /health,
// /authz), on jose, and the optional server nonces. What a proof must be is RFC 9449 §4.3; which key a
// token is bound to is the token record's, decided by the caller with the thumbprint returned here.

import { createHmac, hash, hkdfSync, timingSafeEqual } from 'node:crypto';
import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, jwtVerify, type JWK } from 'jose';
import type { Clock } from '../model/clock.ts';
import type { Config } from '../config/load.ts';
import type { OneTimeValueStorage } from '../store/types.ts';

/** Asymmetric algorithms only (RFC 9449 §11.6): never `none`, never an HMAC. */
export const DPOP_ALGORITHMS: readonly string[] = ['ES256', 'RS256', 'PS256', 'EdDSA'];

/** The `algs` parameter of a DPoP challenge (RFC 9449 §7.1). */
export const DPOP_ALGS_PARAMETER = DPOP_ALGORITHMS.join(' ');

/** A proof is a compact JWS with a public key in its header: an RSA-4096 key and its claims fit well within this. */
export const MAX_PROOF_BYTES = 4096;

/** A `jti` is a random id (RFC 9449 §4.2: 96 bits or more); longer values are refused, not stored. */
const MAX_JTI_LENGTH = 256;

/** Private members of a JWK (RSA, EC, OKP) and a symmetric key's: a proof carries a public key only. */
const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** Why a proof was refused: logged and counted, never sent to the client beyond its error code. */
export type DpopRefusal =
  'missing' | 'malformed' | 'signature' | 'typ' | 'algorithm' | 'key' | 'iat' | 'jti' | 'htm' | 'htu' | 'ath' | 'nonce';

export class DpopProofError extends Error {
  readonly reason: DpopRefusal;
  constructor(reason: DpopRefusal, cause?: unknown) {
    super(`DPoP proof refused: ${reason}`, cause === undefined ? undefined : { cause });
    this.name = 'DpopProofError';
    this.reason = reason;
  }
}

/** What the request the proof came with is: its method and every URL it may name (RFC 9449 §4.3 steps 8 and 9). */
export interface ProofTarget {
  /** The HTTP method of the request (for forward-auth: the original request's). */
  method: string;
  /** The URLs the request was made to, without query or fragment; `htu` must name one of them. */
  urls: readonly string[];
  /** The access token presented with the proof (resource requests): `ath` must be its hash. */
  accessToken?: string;
}

/** A proof whose signature, claims and target have been checked; its `jti` is not yet spent. */
export interface CheckedProof {
  /** The RFC 7638 SHA-256 thumbprint of the proof's key: what a token is bound to (`cnf.jkt`). */
  jkt: string;
  jti: string;
  /** Epoch seconds. */
  iat: number;
}

/**
 * The `DPoP` request header: `missing`, `malformed` (several, empty or longer than a proof may be), or
 * its value. `rawHeaders` is scanned because Node joins duplicate unknown headers with a comma.
 */
export function dpopHeader(rawHeaders: readonly string[]): { kind: 'missing' } | { kind: 'malformed' } | { kind: 'proof'; proof: string } {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'dpop') {
      if (value !== undefined) return { kind: 'malformed' };
      value = rawHeaders[i + 1] ?? '';
    }
  }
  if (value === undefined) return { kind: 'missing' };
  if (value.length === 0 || value.length > MAX_PROOF_BYTES) return { kind: 'malformed' };
  return { kind: 'proof', proof: value };
}

/** base64url SHA-256 of the access token: the `ath` claim (RFC 9449 §4.2). */
export function accessTokenHash(accessToken: string): string {
  return hash('sha256', accessToken, 'base64url');
}

/** Constant-time equality of two thumbprints (or any two short ASCII values). */
export function sameValue(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

export interface DpopVerifierOptions {
  store: OneTimeValueStorage;
  clock: Clock;
  /** How far `iat` may lie from now, either way (clock skew and the request's time in flight). */
  windowSeconds: number;
  /** Server nonces (RFC 9449 §8, §9); undefined: none asked for. */
  nonces?: DpopNonces | undefined;
}

/**
 * Checks proofs. `check` verifies everything a proof states (signature, header, claims, target) without
 * touching the store; `spend` then records its `jti` once across replicas, to be called only when the
 * request is otherwise accepted (a refused request spends nothing).
 */
export class DpopVerifier {
  readonly #options: DpopVerifierOptions;

  constructor(options: DpopVerifierOptions) {
    this.#options = options;
  }

  get nonces(): DpopNonces | undefined {
    return this.#options.nonces;
  }

  async check(proof: string, target: ProofTarget): Promise<CheckedProof> {
    let header;
    try {
      header = decodeProtectedHeader(proof);
    } catch (err) {
      throw new DpopProofError('malformed', err);
    }
    // Checked before the signature, so that each refusal names its cause (jose would say "invalid").
    if (header.typ !== 'dpop+jwt') throw new DpopProofError('typ');
    if (typeof header.alg !== 'string' || !DPOP_ALGORITHMS.includes(header.alg)) throw new DpopProofError('algorithm');
    const jwk = header.jwk as JWK | undefined;
    if (typeof jwk !== 'object' || jwk === null || PRIVATE_JWK_MEMBERS.some((member) => member in jwk)) throw new DpopProofError('key');
    const now = this.#options.clock.now();
    let payload;
    try {
      ({ payload } = await jwtVerify(proof, EmbeddedJWK, {
        typ: 'dpop+jwt',
        algorithms: [...DPOP_ALGORITHMS],
        currentDate: new Date(now),
        requiredClaims: ['iat', 'jti', 'htm', 'htu'],
      }));
    } catch (err) {
      throw new DpopProofError('signature', err);
    }
    const { iat, jti, htm, htu, ath, nonce } = payload as Record<string, unknown>;
    if (typeof iat !== 'number' || !Number.isFinite(iat) || Math.abs(now / 1000 - iat) > this.#options.windowSeconds)
      throw new DpopProofError('iat');
    if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) throw new DpopProofError('jti');
    if (htm !== target.method) throw new DpopProofError('htm');
    if (typeof htu !== 'string' || !namesOneOf(htu, target.urls)) throw new DpopProofError('htu');
    if (target.accessToken !== undefined) {
      if (typeof ath !== 'string' || !sameValue(ath, accessTokenHash(target.accessToken))) throw new DpopProofError('ath');
    }
    const nonces = this.#options.nonces;
    if (nonces !== undefined && (typeof nonce !== 'string' || !nonces.accepts(nonce, now))) throw new DpopProofError('nonce');
    const jkt = await calculateJwkThumbprint(jwk, 'sha256');
    return { jkt, jti, iat };
  }

  /**
   * Records the proof's `jti` (per key) for as long as the proof could be accepted anywhere, with the
   * window again as margin for replicas whose clocks differ; false when it was used before.
   */
  spend(proof: CheckedProof): Promise<boolean> {
    const keepUntil = (proof.iat + 2 * this.#options.windowSeconds) * 1000;
    return this.#options.store.useOnce(
      `dpop:${proof.jkt}:${hash('sha256', proof.jti, 'hex')}`,
      Math.max(keepUntil, this.#options.clock.now() + 1000),
    );
  }
}

/** The verifier the configuration asks for: its window, and server nonces when `oauth.dpopNonce` is on. */
export function dpopVerifierFor(config: Config, store: OneTimeValueStorage, clock: Clock): DpopVerifier {
  const windowSeconds = config.oauth.dpopProofWindowSeconds;
  return new DpopVerifier({
    store,
    clock,
    windowSeconds,
    nonces: config.oauth.dpopNonce ? new DpopNonces(config.masterToken, windowSeconds) : undefined,
  });
}

/**
 * Whether `htu` names one of `urls`, as RFC 9449 §4.3 asks: query and fragment ignored, and both sides
 * normalised the RFC 3986 §6.2.2 / §6.2.3 way (case of scheme and host, default port, dot segments,
 * percent-encoding case, unreserved characters decoded) before they are compared.
 */
export function namesOneOf(htu: string, urls: readonly string[]): boolean {
  const claimed = normalisedUrl(htu);
  if (claimed === undefined) return false;
  return urls.some((url) => normalisedUrl(url) === claimed);
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/** The URL without query and fragment, normalised; undefined when it is not an absolute http(s) URL. */
export function normalisedUrl(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  if (url.username !== '' || url.password !== '') return undefined;
  // WHATWG URL parsing lowercases scheme and host, drops a default port and removes dot segments;
  // percent-encodings are left as written, so they are brought to one form here.
  const path = url.pathname.replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
  return `${url.protocol}//${url.host}${path}`;
}

/**
 * Server nonces (RFC 9449 §8, §9) that every replica issues and accepts without shared state: a nonce
 * is a time slot and an HMAC of it under a key derived from the master token (which every replica
 * has). A nonce of the current or the previous slot is accepted, so one lives one to two slots.
 */
export class DpopNonces {
  readonly #key: Buffer;
  readonly #slotMs: number;

  constructor(masterToken: string, slotSeconds: number) {
    this.#key = Buffer.from(hkdfSync('sha256', masterToken, 'mcp-bearer-proxy', 'dpop-nonce', 32));
    this.#slotMs = slotSeconds * 1000;
  }

  /** The nonce to hand out now (the `DPoP-Nonce` response header). */
  current(now: number): string {
    return this.#nonceOf(Math.floor(now / this.#slotMs));
  }

  accepts(nonce: string, now: number): boolean {
    const slot = Math.floor(now / this.#slotMs);
    // Both compared, whichever matches: the time taken does not say which slot a nonce was of.
    const current = sameValue(nonce, this.#nonceOf(slot));
    const previous = sameValue(nonce, this.#nonceOf(slot - 1));
    return current || previous;
  }

  #nonceOf(slot: number): string {
    const slotBytes = Buffer.alloc(8);
    slotBytes.writeBigUInt64BE(BigInt(Math.max(0, slot)));
    return createHmac('sha256', this.#key).update(slotBytes).digest('base64url').slice(0, 32);
  }
}
