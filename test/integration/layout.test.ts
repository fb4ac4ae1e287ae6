// The store's layout version key, checked before the sidecar serves (src/store/layout.ts): written on
// an empty store, accepted when current, refused (naming `mcp-bearer-proxy migrate`) for layout 1 or
// a value this version does not know. Real Redis; the layout-1 record is written as that layout
// named it (`<prefix>{oauth}:oauthAccessTokens:<hash>`, as test/support/layout-1.ts's code writes it).

import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { ensureLayout, legacyKey } from '../../src/store/layout.ts';
import { keyLayout } from '../../src/store/records.ts';
import { deleteUnder, rawRedis, redisUrl, uniquePrefix } from '../support/redis.ts';
import { runMigrate } from '../../src/entry/migrate.ts';

describe('the layout version key', () => {
  let raw: Redis;
  const prefixes: string[] = [];
  const fresh = () => {
    const prefix = uniquePrefix('layout');
    prefixes.push(prefix);
    return keyLayout(prefix);
  };
  beforeAll(async () => {
    raw = await rawRedis();
  });
  afterAll(async () => {
    for (const p of prefixes) await deleteUnder(raw, p);
    await raw.quit();
  });

  it('an empty store gets the current layout written; the next start finds it', async () => {
    const keys = fresh();
    expect(await ensureLayout(raw, keys)).toEqual({ ok: true, layout: 2, written: true });
    expect(await raw.get(keys.layout())).toBe('2');
    expect(await ensureLayout(raw, keys)).toEqual({ ok: true, layout: 2, written: false });
  });

  it('records of the current layout alone (no version key yet) count as a store to write the version on', async () => {
    const keys = fresh();
    await raw.hset(keys.accessToken(hashToken(generateToken())), 'clientId', 'c');
    await raw.hset(keys.userToken(hashToken(generateToken())), 'revoked', 'false');
    expect(await ensureLayout(raw, keys)).toMatchObject({ ok: true, written: true });
  });

  it('a store with a record of layout 1 and no version key is refused, naming the command; nothing is written', async () => {
    const keys = fresh();
    await raw.hset(legacyKey(keys, 'oauthAccessTokens', hashToken(generateToken())), 'clientId', 'c');
    const check = await ensureLayout(raw, keys);
    expect(check).toMatchObject({ ok: false, found: '1' });
    expect(!check.ok && check.problem).toContain('`mcp-bearer-proxy migrate`');
    expect(await raw.get(keys.layout())).toBeNull();
  });

  it.each([['1'], ['3'], ['two'], ['']])('a version key of %j is refused, naming the command', async (value) => {
    const keys = fresh();
    await raw.set(keys.layout(), value);
    const check = await ensureLayout(raw, keys);
    expect(check.ok).toBe(false);
    expect(!check.ok && check.problem).toContain('mcp-bearer-proxy migrate');
    expect(await raw.get(keys.layout())).toBe(value);
  });
});

describe('mcp-bearer-proxy migrate: what it refuses, and an empty store', () => {
  let raw: Redis;
  const prefixes: string[] = [];
  beforeAll(async () => {
    raw = await rawRedis();
  });
  afterAll(async () => {
    for (const p of prefixes) await deleteUnder(raw, p);
    await raw.quit();
  });

  async function migrate(args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const env = { BEARER_SECRET_MASTER: generateToken(), REDIS_URL: redisUrl(), UPSTREAM_URL: 'http://127.0.0.1:9/mcp' };
    const code = await runMigrate(args, {
      stdout: { write: (t: string) => (out += t) },
      stderr: { write: (t: string) => (err += t) },
      env,
    });
    return { code, out, err };
  }
  const fresh = () => {
    const prefix = uniquePrefix('migrate-cli');
    prefixes.push(prefix);
    return prefix;
  };

  it('an empty store: nothing moved, the layout recorded, exit 0', async () => {
    const prefix = fresh();
    const run = await migrate(['--redis.keyPrefix', prefix]);
    expect(run).toMatchObject({ code: 0 });
    expect(run.out).toContain('moved 0 records to layout 2');
    expect(await raw.get(keyLayout(prefix).layout())).toBe('2');
  });

  it('a store of a layout it does not bring over: exit 2, nothing done', async () => {
    const prefix = fresh();
    await raw.set(keyLayout(prefix).layout(), '9');
    const run = await migrate(['--redis.keyPrefix', prefix]);
    expect(run.code).toBe(2);
    expect(run.err).toContain('nothing done');
    expect(await raw.get(keyLayout(prefix).layout())).toBe('9');
  });

  it.each([
    ['an unknown flag', ['--frobnicate'], /unknown argument/],
    ['the in-memory store', ['--store', 'memory'], /in-memory/],
    ['an invalid configuration', ['--redis.commandTimeoutMs', 'soon'], /configuration is invalid/],
  ])('%s: exit 2, said on stderr', async (_, args, said) => {
    const run = await migrate(args);
    expect(run.code).toBe(2);
    expect(run.err).toMatch(said);
  });
});
