// The SCAN MATCH globs of the key layout as the memory engine reads them (globMatcher), checked
// against what a real Redis's SCAN MATCH answers for the same keys: a prefix holding glob characters
// is taken literally (escapeGlob), `?` is one character, `*` any run.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { escapeGlob, globMatcher, keyLayout } from '../../src/store/key-layout.ts';
import { deleteUnder, rawRedis, uniquePrefix } from '../support/redis.ts';

let raw: Redis;
let base: string;
beforeAll(async () => {
  raw = await rawRedis();
  base = uniquePrefix('glob');
});
afterAll(async () => {
  try {
    await deleteUnder(raw, base);
  } finally {
    await raw.quit();
  }
});

/** What SCAN MATCH `pattern` finds among the keys under base. */
async function redisMatches(pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await raw.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found.sort();
}

describe('globMatcher', () => {
  it('matches the keys SCAN MATCH finds, for a prefix with glob characters and the bucketed patterns', async () => {
    const prefix = `${base}a*b?[c]\\d:`;
    const keys = keyLayout(prefix);
    const names = [
      keys.accessToken('f'.repeat(64)),
      keys.refreshToken('0'.repeat(64)),
      keys.userToken('ab'),
      `${base}aXbY[c]\\d:userBearerTokens:ab`,
      `${prefix}{oauth:abc}:oauthAccessTokens:x`,
      `${prefix}{oauth:a}:oauthAccessTokens:x`,
    ];
    for (const name of names) await raw.set(name, '1');
    for (const pattern of [
      keys.accessTokenPattern(),
      keys.refreshTokenPattern(),
      `${escapeGlob(keys.userToken(''))}*`,
      `${escapeGlob(base)}*`,
    ]) {
      const matches = globMatcher(pattern);
      expect(names.filter(matches).sort(), pattern).toEqual(await redisMatches(pattern));
    }
    // The bucketed pattern takes exactly two characters of bucket.
    expect(names.filter(globMatcher(keys.accessTokenPattern()))).toEqual([keys.accessToken('f'.repeat(64))]);
  });

  it('refuses a character class rather than read it as something else', () => {
    expect(() => globMatcher('a[bc]*')).toThrow(/character classes are not supported/);
  });
});
