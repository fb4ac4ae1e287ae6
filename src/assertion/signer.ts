// Caller assertions: the ES256 JWT that tells the upstream who the sidecar authenticated, so that it
// can verify the caller instead of trusting the network. Signing costs more than the rest of a
// request, so an assertion is reused for the same principal while more than half its life is left.

import { randomBytes } from 'node:crypto';
import { SignJWT } from 'jose';
import { BoundedMap } from '../model/bounded-map.ts';
import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import type { SigningKeys } from './keys.ts';

/** Principals whose assertion is kept (least recently signed dropped first). */
export const ASSERTION_CACHE_ENTRIES = 10_000;

export interface AssertionSignerOptions {
  keys: Pick<SigningKeys, 'current'>;
  clock: Clock;
  /** `iss`: the sidecar's public URL (known once the listener is bound when PORT=0). */
  issuer: () => string;
  audience: string;
  lifetimeSeconds: number;
  maxEntries?: number;
}

interface Cached {
  assertion: string | Promise<string>;
  kid: string;
  /** Epoch ms after which it is signed anew (half its life gone). */
  renewAt: number;
}

export class AssertionSigner {
  readonly #options: AssertionSignerOptions;
  readonly #cache: BoundedMap<string, Cached>;

  constructor(options: AssertionSignerOptions) {
    this.#options = options;
    this.#cache = new BoundedMap(options.maxEntries ?? ASSERTION_CACHE_ENTRIES);
  }

  /** The assertion for `principal`: the cached one (synchronously) while it may be reused, else a new one. */
  assertionFor(principal: Principal): string | Promise<string> {
    const now = this.#options.clock.now();
    const key = this.#options.keys.current();
    // Every claim the assertion states is in the cache key: two principals never share one.
    const id = JSON.stringify([
      principal.kind,
      principal.subject,
      principal.issuer ?? null,
      principal.clientId ?? null,
      principal.scope ?? null,
      principal.groups ?? null,
      principal.email ?? null,
    ]);
    const cached = this.#cache.get(id);
    if (cached !== undefined && now < cached.renewAt && cached.kid === key.kid) return cached.assertion;
    const iat = Math.floor(now / 1000);
    const claims: Record<string, unknown> = { mcp_kind: principal.kind };
    if (principal.issuer !== undefined) claims.mcp_issuer = principal.issuer;
    if (principal.clientId !== undefined) claims.client_id = principal.clientId;
    if (principal.scope !== undefined) claims.scope = principal.scope;
    if (principal.groups !== undefined) claims.groups = principal.groups;
    if (principal.email !== undefined) claims.email = principal.email;
    const signing = new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' })
      .setIssuer(this.#options.issuer())
      .setAudience(this.#options.audience)
      .setSubject(principal.subject)
      .setIssuedAt(iat)
      .setExpirationTime(iat + this.#options.lifetimeSeconds)
      .setJti(randomBytes(16).toString('base64url'))
      .sign(key.privateKey);
    const entry: Cached = { assertion: signing, kid: key.kid, renewAt: iat * 1000 + (this.#options.lifetimeSeconds * 1000) / 2 };
    // Concurrent requests of one principal share the signing under way.
    this.#cache.set(id, entry);
    return signing.then(
      (assertion) => {
        entry.assertion = assertion;
        return assertion;
      },
      (err: unknown) => {
        if (this.#cache.get(id) === entry) this.#cache.delete(id);
        throw err;
      },
    );
  }

  /** Principals whose assertion is cached. */
  get size(): number {
    return this.#cache.size;
  }
}
