// DPoP proofs as a client makes them (RFC 9449 §4.2: a JWS of typ dpop+jwt, the public JWK in its
// header, claims jti, htm, htu, iat, and ath beside an access token), with knobs to make each kind of
// bad proof a test needs. The shape is the one the MCP SDK's 2.x client (DpopSession.buildProof) sends.

import { randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { accessTokenHash } from '../../src/oauth/dpop.ts';

export interface ProofClaims {
  htm: string;
  htu: string;
  /** The access token the proof goes with (resource requests): `ath` is its hash. */
  accessToken?: string;
  /** Epoch seconds; default now. */
  iat?: number;
  jti?: string;
  nonce?: string;
  /** Replaces `ath` (a wrong one). */
  ath?: string;
}

export interface ProofOptions {
  typ?: string;
  /** Header `jwk` to state instead of this key's public one. */
  jwk?: JWK;
  /** Claims to leave out. */
  omit?: readonly string[];
}

export class DpopKey {
  readonly alg: string;
  readonly publicJwk: JWK;
  readonly privateKey: CryptoKey;

  private constructor(alg: string, publicJwk: JWK, privateKey: CryptoKey) {
    this.alg = alg;
    this.publicJwk = publicJwk;
    this.privateKey = privateKey;
  }

  static async generate(alg = 'ES256'): Promise<DpopKey> {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
    const jwk = await exportJWK(publicKey);
    return new DpopKey(alg, jwk, privateKey);
  }

  /** The RFC 7638 thumbprint the server binds tokens to. */
  thumbprint(): Promise<string> {
    return calculateJwkThumbprint(this.publicJwk, 'sha256');
  }

  async privateJwk(): Promise<JWK> {
    return exportJWK(this.privateKey);
  }

  async proof(claims: ProofClaims, options: ProofOptions = {}): Promise<string> {
    const payload: Record<string, unknown> = {
      jti: claims.jti ?? randomUUID(),
      htm: claims.htm,
      htu: claims.htu,
    };
    if (claims.accessToken !== undefined) payload.ath = accessTokenHash(claims.accessToken);
    if (claims.ath !== undefined) payload.ath = claims.ath;
    if (claims.nonce !== undefined) payload.nonce = claims.nonce;
    for (const name of options.omit ?? []) delete payload[name];
    const jwt = new SignJWT(payload).setProtectedHeader({
      alg: this.alg,
      typ: options.typ ?? 'dpop+jwt',
      jwk: options.jwk ?? this.publicJwk,
    });
    if (!options.omit?.includes('iat')) jwt.setIssuedAt(claims.iat ?? Math.floor(Date.now() / 1000));
    return jwt.sign(this.privateKey);
  }
}

/** An unsigned JWT (`alg: none`) with a DPoP header and claims: what an attacker without a key sends. */
export function unsignedProof(jwk: JWK, claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'dpop+jwt', jwk })}.${part({ jti: randomUUID(), iat: Math.floor(Date.now() / 1000), ...claims })}.`;
}

/** A proof MACed with HS256 under a shared secret, the secret stated as a symmetric JWK. */
export async function hmacProof(claims: Record<string, unknown>): Promise<string> {
  const secret = new TextEncoder().encode('a shared secret of thirty-two by');
  const jwk = { kty: 'oct', k: Buffer.from(secret).toString('base64url') };
  return new SignJWT({ jti: randomUUID(), ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk })
    .setIssuedAt()
    .sign(secret);
}
