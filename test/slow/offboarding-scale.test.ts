// revokeSubject on a person holding 100,000 tokens, against a private redis-server whose SLOWLOG
// records every command: the revocation goes in batches, so no single command carries more than one
// batch's members (read from the log's argument counts), and the longest command is printed. The
// ID-JAG shape of the access tokens (an access token alone, acting for the user) is how
// src/oauth/grants/id-jag.ts stores them; the user-grade ones are how the token exchange does.

import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../src/model/clock.ts';
import { decideToken, generateToken, hashToken } from '../../src/model/credentials.ts';
import { SUBJECT_REVOCATION_BATCH } from '../../src/model/person-grants.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { openRedisStore, rawRedis } from '../support/redis.ts';
import { startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { credentialsClient } from '../support/clients.ts';

const HALF = 50_000;
const HOUR = 3_600_000;

let server: RedisServer;
let store: RedisTokenStore;
let raw: Redis;

beforeAll(async () => {
  server = await startRedisServer(['--slowlog-log-slower-than', '0', '--slowlog-max-len', '1000000']);
  store = await openRedisStore('scale:', { url: server.url, commandTimeoutMs: 10_000 });
  raw = await rawRedis(server.url);
});
afterAll(async () => {
  await store?.close();
  await raw?.quit();
  await server?.stop();
});

/** A SLOWLOG entry: id, start (s), duration (µs), arguments (at most 32 shown, the last then says how many more). */
type SlowEntry = [number, number, number, string[], ...unknown[]];

function argumentCount(args: string[]): number {
  const more = /^\.\.\. \((\d+) more arguments\)$/.exec(args.at(-1) ?? '');
  return more ? args.length - 1 + Number(more[1]) : args.length;
}

it('a person with 100,000 tokens is revoked in batches: no command carries more than one batch, every token refused after', async () => {
  const clock = new ManualClock(Date.now());
  const now = clock.now();
  const user = { subject: 'leaver', issuer: 'https://idp.example.com/' };
  await store.createClient(credentialsClient('c-scale', now));
  const sample: string[] = [];
  for (let i = 0; i < HALF; i += 1000) {
    const writes: Array<Promise<unknown>> = [];
    for (let j = 0; j < 1000; j++) {
      const access = hashToken(generateToken());
      const userToken = hashToken(generateToken());
      if (j === 0) sample.push(access, userToken);
      writes.push(store.createAccessToken({ tokenHash: access, clientId: 'c-scale', user, createdAt: now, expiresAt: now + HOUR }));
      writes.push(store.putUserToken({ tokenHash: userToken, ...user, createdAt: now, expiresAt: now + HOUR }));
    }
    await Promise.all(writes);
  }
  const other = hashToken(generateToken());
  await store.putUserToken({ tokenHash: other, subject: 'stays', issuer: user.issuer, createdAt: now, expiresAt: now + HOUR });

  await raw.slowlog('RESET');
  const started = process.hrtime.bigint();
  const result = await store.revokeSubject('leaver', undefined, now, SUBJECT_REVOCATION_BATCH);
  const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
  const log = (await raw.slowlog('GET', -1)) as SlowEntry[];

  expect(result).toEqual({ accessTokensRevoked: HALF, refreshTokensRevoked: 0, userTokensRevoked: HALF, consentsForgotten: 0 });
  // Everything the revocation sent, as Redis saw it (the log's own SLOWLOG calls aside).
  const commands = log.filter(([, , , args]) => args[0]?.toUpperCase() !== 'SLOWLOG');
  expect(commands.length).toBeGreaterThan(HALF);
  const widest = commands.reduce((m, [, , , args]) => Math.max(m, argumentCount(args)), 0);
  // No command wider than one batch's members and ten more: a batch's plans (revokeSubjectBatch) carry
  // about 17 arguments a revoked token and at most 11 tokens each.
  expect(widest).toBeLessThanOrEqual(SUBJECT_REVOCATION_BATCH + 10);
  const longest = commands.reduce((a, b) => (b[2] > a[2] ? b : a));
  const scripts = commands
    .filter(([, , , args]) => args[0]?.toUpperCase() === 'EVALSHA')
    .map(([, , us]) => us)
    .sort((a, b) => a - b);
  const p = (q: number) => scripts[Math.min(scripts.length - 1, Math.floor(q * scripts.length))];
  console.log(
    `revokeSubject of ${2 * HALF} tokens: ${elapsedMs.toFixed(0)} ms in all, ${commands.length} commands; ` +
      `longest command ${longest[2]} µs (${longest[3][0]} with ${argumentCount(longest[3])} arguments); widest ${widest} arguments; ` +
      `scripts: ${scripts.length}, p50 ${p(0.5)} µs, p99 ${p(0.99)} µs, p99.9 ${p(0.999)} µs`,
  );

  for (const hash of sample) expect(decideToken(hash, await store.lookupToken(hash), now)).toEqual({ ok: false, reason: 'revoked' });
  expect(decideToken(other, await store.lookupToken(other), now).ok).toBe(true);
  expect(await store.revokeSubject('leaver', undefined, now, SUBJECT_REVOCATION_BATCH)).toEqual({
    accessTokensRevoked: 0,
    refreshTokensRevoked: 0,
    userTokensRevoked: 0,
    consentsForgotten: 0,
  });
}, 300_000);
