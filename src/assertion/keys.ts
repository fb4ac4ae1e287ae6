// The keys caller assertions are signed with. Each process makes its own P-256 key (nothing shared to
// configure) or is given one by the operator; only the public half leaves the process, published
// through the store so that every replica's JWKS lists every replica's keys. A generated key is
// replaced on a schedule: the next one is listed before it signs, the old one stays listed until the
// last assertion it signed has expired.

import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { readFileSync } from 'node:fs';
import type { Clock } from '../model/clock.ts';
import { describe, type Logger } from '../observability/logger.ts';
import type { SigningKeyStorage } from '../store/types.ts';

/** `Cache-Control: max-age` of the JWKS. */
export const JWKS_MAX_AGE_SECONDS = 60;
/**
 * How long a next key is listed before it signs: longer than the JWKS max-age (a verifier that caches
 * the set for that long has it) and than jose's 30 s refetch cooldown (one that refetches on an unknown
 * `kid` is allowed to).
 */
export const ANNOUNCE_MS = 2 * JWKS_MAX_AGE_SECONDS * 1000;
/** How often each process renews its keys' listing (and checks whether to rotate). */
export const HEARTBEAT_MS = 10_000;
/** Verifiers may accept an assertion this long past its `exp` (clock leeway): its key stays listed that much longer. */
const LEEWAY_MS = 60_000;

export interface SigningKey {
  /** RFC 7638 thumbprint of the public key. */
  readonly kid: string;
  /** Never exported, logged or stored. */
  readonly privateKey: KeyObject;
  /** The public half as listed in the JWKS (`kty`, `crv`, `x`, `y`, `kid`, `alg`, `use`). */
  readonly publicJwk: JWK;
}

async function signingKeyOf(privateKey: KeyObject): Promise<SigningKey> {
  const { kty, crv, x, y } = createPublicKey(privateKey).export({ format: 'jwk' });
  const kid = await calculateJwkThumbprint({ kty, crv, x, y } as JWK);
  return { kid, privateKey, publicJwk: { kty, crv, x, y, kid, alg: 'ES256', use: 'sig' } as JWK };
}

export function generateSigningKey(): Promise<SigningKey> {
  return signingKeyOf(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey);
}

/** The operator's key: PEM (PKCS #8 or SEC 1) or a private JWK as JSON. Errors never quote the key. */
function privateKeyFrom(text: string): KeyObject {
  const trimmed = text.trim();
  let key: KeyObject;
  try {
    key = trimmed.startsWith('{') ? createPrivateKey({ key: JSON.parse(trimmed) as JsonWebKey, format: 'jwk' }) : createPrivateKey(trimmed);
  } catch {
    throw new Error('not a readable private key (expected a PEM private key or a private JWK as JSON)');
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error('must be an EC P-256 private key (ES256)');
  }
  return key;
}

/** Why the operator's key text cannot be used; undefined when it can. */
export function signingKeyProblem(text: string): string | undefined {
  try {
    privateKeyFrom(text);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The operator's signing key as text, with the name it was given by; undefined when none is configured. */
export function signingKeyText(upstream: {
  readonly assertionKey?: string | undefined;
  readonly assertionKeyFile?: string | undefined;
}): { text: string; label: string; error?: undefined } | { error: string; label: string } | undefined {
  if (upstream.assertionKey !== undefined) return { text: upstream.assertionKey, label: 'UPSTREAM_ASSERTION_KEY' };
  const path = upstream.assertionKeyFile;
  if (path === undefined) return undefined;
  const label = `UPSTREAM_ASSERTION_KEY_FILE "${path}"`;
  try {
    return { text: readFileSync(path, 'utf8'), label };
  } catch (err) {
    return { error: `${label} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`, label };
  }
}

export function parseSigningKey(text: string): Promise<SigningKey> {
  return signingKeyOf(privateKeyFrom(text));
}

export interface SigningKeysOptions {
  store: SigningKeyStorage;
  clock: Clock;
  logger: Logger;
  /** The longest an assertion lives (ms): how long a key stays listed after it last signed. */
  assertionLifetimeMs: number;
  /** A generated key is replaced this often (ms). */
  rotationMs: number;
  /** The operator's key: signs for ever, never rotated. */
  pinned?: SigningKey;
  /** Makes a new key (tests watch the keys a process makes). */
  generate?: () => Promise<SigningKey>;
}

/** A key this process has published, with until when its listing lasts. */
interface Held {
  key: SigningKey;
  /** Epoch ms from which it may sign (a next key: once it has been listed for ANNOUNCE_MS). */
  usableFrom: number;
  /** Epoch ms until which it is listed (for a retired key, fixed at retirement). */
  listedUntil: number;
}

export class SigningKeys {
  readonly #options: SigningKeysOptions;
  readonly #generate: () => Promise<SigningKey>;
  #current!: Held;
  /** Since when the current key signs (rotation counts from here). */
  #currentSince = 0;
  #next: Held | undefined;
  #retired: Held[] = [];
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #listing: Promise<JWK[]> | undefined;

  constructor(options: SigningKeysOptions) {
    this.#options = options;
    this.#generate = options.generate ?? generateSigningKey;
  }

  /** Publishes the first key (rejects when the store cannot take it) and starts the heartbeat. */
  async start(): Promise<void> {
    const now = this.#options.clock.now();
    const key = this.#options.pinned ?? (await this.#generate());
    this.#current = { key, usableFrom: now, listedUntil: 0 };
    this.#currentSince = now;
    await this.#publish(this.#current, now);
    this.#options.logger.info({ kid: key.kid, pinned: this.#options.pinned !== undefined }, 'assertion signing key published');
    this.#timer = setInterval(() => void this.tick(), HEARTBEAT_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** The key to sign with now. */
  current(): SigningKey {
    return this.#current.key;
  }

  /**
   * One heartbeat: rotates when due (a next key listed ANNOUNCE_MS ahead, then used), and renews the
   * listing of the keys in use. A failure is logged; the next heartbeat tries again.
   */
  tick(): Promise<void> {
    this.#ticking ??= this.#beat().finally(() => {
      this.#ticking = undefined;
    });
    return this.#ticking;
  }

  async #beat(): Promise<void> {
    const { clock, logger } = this.#options;
    try {
      if (this.#options.pinned === undefined) await this.#rotate(clock.now());
      const now = clock.now();
      await this.#publish(this.#current, now);
      if (this.#next !== undefined) await this.#publish(this.#next, now);
      this.#retired = this.#retired.filter((held) => held.listedUntil > now);
    } catch (err) {
      logger.warn({ err: describe(err) }, 'assertion signing keys: could not renew their listing; retrying at the next heartbeat');
    }
  }

  async #rotate(now: number): Promise<void> {
    const due = this.#currentSince + this.#options.rotationMs;
    if (this.#next === undefined && now >= due - ANNOUNCE_MS) {
      const next: Held = { key: await this.#generate(), usableFrom: Infinity, listedUntil: 0 };
      await this.#publish(next, now);
      // Only a key whose listing is stored counts as announced.
      next.usableFrom = now + ANNOUNCE_MS;
      this.#next = next;
      this.#options.logger.info({ kid: next.key.kid }, 'next assertion signing key published');
    }
    const next = this.#next;
    if (next === undefined || now < due || now < next.usableFrom) return;
    const old = this.#current;
    // Every assertion the old key signed expires by now + lifetime.
    old.listedUntil = Math.max(old.listedUntil, now + this.#options.assertionLifetimeMs + LEEWAY_MS);
    await this.#options.store.publishSigningKey(
      { kid: old.key.kid, jwk: JSON.stringify(old.key.publicJwk), expiresAt: old.listedUntil },
      now,
    );
    this.#retired.push(old);
    this.#current = next;
    this.#currentSince = now;
    this.#next = undefined;
    this.#options.logger.info({ kid: next.key.kid, retired: old.key.kid }, 'assertion signing key rotated');
  }

  /**
   * Lists a key in use until a process killed right after this heartbeat would still have it listed
   * until its last assertion expired (heartbeats renew it long before).
   */
  async #publish(held: Held, now: number): Promise<void> {
    const listedUntil = now + this.#options.assertionLifetimeMs + LEEWAY_MS + 2 * HEARTBEAT_MS;
    await this.#options.store.publishSigningKey(
      { kid: held.key.kid, jwk: JSON.stringify(held.key.publicJwk), expiresAt: listedUntil },
      now,
    );
    held.listedUntil = Math.max(held.listedUntil, listedUntil);
  }

  /** Every key any replica may sign with or has signed a live assertion with (rejects when the store cannot answer). */
  jwks(): Promise<JWK[]> {
    // Concurrent requests share one store read.
    this.#listing ??= this.#list().finally(() => {
      this.#listing = undefined;
    });
    return this.#listing;
  }

  async #list(): Promise<JWK[]> {
    const now = this.#options.clock.now();
    const byKid = new Map<string, JWK>();
    for (const published of await this.#options.store.listSigningKeys(now)) {
      // Only the members a public EC key has: whatever else an entry holds is not served.
      const { kty, crv, x, y } = JSON.parse(published.jwk) as JWK;
      byKid.set(published.kid, { kty, crv, x, y, kid: published.kid, alg: 'ES256', use: 'sig' });
    }
    // This process's own keys whatever the store says (a listing it could not renew yet).
    for (const held of [this.#current, this.#next, ...this.#retired]) {
      if (held !== undefined && held.listedUntil > now) byKid.set(held.key.kid, held.key.publicJwk);
    }
    return [...byKid.values()].sort((a, b) => (a.kid! < b.kid! ? -1 : a.kid! > b.kid! ? 1 : 0));
  }
}
