// What the revocation proofs share (test/slow/revocation-proof.test.ts on one node,
// test/slow/cluster-revocation-proof.test.ts on a three-master Cluster): the record an operator writes,
// the /authz request, the load, the windows' summary, and "ask until the cache answers".

import { once, type EventEmitter } from 'node:events';
import { request, type Agent } from 'node:http';
import autocannon from 'autocannon';
import { expect } from 'vitest';
import type { LookupCacheStats } from '../../src/store/types.ts';

const HOUR = 3_600_000;

/** Either lookup cache (one node or Cluster), as the proofs watch it. */
export type ProvenCache = EventEmitter & { readonly live: boolean; readonly stats: LookupCacheStats };

/**
 * A user-grade record as the store writes it (src/store/records.ts userTokenFields, as an operator
 * would type it): `revoked` must be exactly "false" for the token to be good, so removing it revokes.
 */
export function userRecord(tokenHash: string, now: number): Record<string, string> {
  return {
    tokenHash,
    subject: 'proof',
    issuer: 'https://idp.example.com/',
    revoked: 'false',
    createdAt: String(now),
    expiresAt: String(now + HOUR),
  };
}

/** GET /authz as nginx auth_request sends it (X-Original-* plus the client's Authorization). */
export function authz(url: string, token: string, agent: Agent | false): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/authz`,
      { agent, headers: { authorization: `Bearer ${token}`, 'x-original-uri': '/mcp', 'x-original-method': 'POST' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** p50, p99 and max of a list of milliseconds, rounded to microseconds. */
export function summary(values: number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => Number((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN).toFixed(3));
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: Number((sorted.at(-1) ?? NaN).toFixed(3)) };
}

/** 32 connections of /authz traffic with a token of its own, until stopped. */
export function load(url: string, token: string): { stop(): Promise<number> } {
  const instance = autocannon({
    url: `${url}/authz`,
    connections: 32,
    duration: 3600,
    headers: { authorization: `Bearer ${token}`, 'x-original-uri': '/mcp', 'x-original-method': 'POST' },
  });
  return {
    async stop() {
      instance.stop();
      const result = await instance;
      return result.requests.total;
    },
  };
}

/**
 * Asks until a request is answered from the cache (neither read from Redis nor past a cache not in
 * use; the load's own token only ever hits, so these counters move for this token alone), waiting
 * for the cache to be live again when it was emptied (after SWAPDB back, a FLUSHALL, a topology change).
 * Returns how many requests that took.
 */
export async function heldAfter(cache: ProvenCache, ask: () => Promise<number>): Promise<number> {
  for (let n = 1; ; n++) {
    if (!cache.live) await once(cache, 'live');
    const { misses, bypasses } = cache.stats;
    const status = await ask();
    // 503: a barrier or a read outlived the command timeout on a loaded machine (the cache is then
    // emptied: fail closed); ask again.
    if (status === 503 && n < 20) continue;
    expect(status).toBe(200);
    if (n > 1 && cache.stats.misses === misses && cache.stats.bypasses === bypasses) return n;
    if (n >= 20) return n;
  }
}
