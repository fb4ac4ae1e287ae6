// The last-use recorder: a token's use is queued at most once per interval, written in batches by
// flush, and the map of tokens it remembers stays bounded. Real MemoryTokenStore, manual clock.

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { generateToken, hashToken, type Principal } from '../../src/model/credentials.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { LastUseRecorder } from '../../src/proxy/last-use.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';

const MINUTE = 60_000;

async function setUp(maxTokens = 1000) {
  const clock = new ManualClock(Date.now());
  const store = new MemoryTokenStore({ clock });
  const writes: number[] = [];
  const recorder = new LastUseRecorder({
    store: {
      recordLastUse: async (uses) => {
        writes.push(uses.length);
        await store.recordLastUse(uses);
      },
    },
    clock,
    logger: createLogger('error'),
    intervalMs: MINUTE,
    maxTokens,
    batchSize: 2,
  });
  return { clock, store, recorder, writes };
}

async function userToken(store: MemoryTokenStore, clock: ManualClock): Promise<Principal> {
  const tokenHash = hashToken(generateToken());
  await store.putUserToken({
    tokenHash,
    subject: 'alice',
    issuer: 'https://idp.example.com/',
    createdAt: clock.now(),
    expiresAt: clock.now() + 3_600_000,
  });
  return { kind: 'user', subject: 'alice', tokenHash };
}

describe('LastUseRecorder', () => {
  it('queues a token at most once per interval and writes the queue in batches', async () => {
    const { clock, store, recorder, writes } = await setUp();
    const a = await userToken(store, clock);
    const b = await userToken(store, clock);
    const c = await userToken(store, clock);
    const first = clock.now();
    for (let i = 0; i < 100; i++) recorder.seen(a, clock.now());
    recorder.seen(b, clock.now());
    recorder.seen(c, clock.now());
    expect(recorder.pending).toBe(3);
    await recorder.flush();
    expect(writes).toEqual([2, 1]);
    const byHash = new Map((await store.listSubjectTokens('alice', clock.now())).map((t) => [t.tokenHash, t.lastUsedAt]));
    expect(byHash.get(a.tokenHash!)).toBe(first);
    // Within the interval: nothing more is written.
    clock.advance(MINUTE - 1);
    recorder.seen(a, clock.now());
    expect(recorder.pending).toBe(0);
    // Once it has passed: the new time is written.
    clock.advance(1);
    recorder.seen(a, clock.now());
    await recorder.flush();
    expect((await store.listSubjectTokens('alice', clock.now())).find((t) => t.tokenHash === a.tokenHash)?.lastUsedAt).toBe(first + MINUTE);
  });

  it('never queues the master token or a principal without a token hash', async () => {
    const { clock, recorder } = await setUp();
    recorder.seen({ kind: 'master', subject: 'master' }, clock.now());
    recorder.seen({ kind: 'user', subject: 'x' }, clock.now());
    expect(recorder.pending).toBe(0);
  });

  it('remembers at most maxTokens tokens: past it, it forgets rather than grows (more writes, never more memory)', async () => {
    const { clock, recorder } = await setUp(3);
    const principals = Array.from(
      { length: 10 },
      () => ({ kind: 'oauth', subject: 's', tokenHash: hashToken(generateToken()) }) as Principal,
    );
    for (const p of principals) recorder.seen(p, clock.now());
    expect(recorder.pending).toBe(10);
    // The first token was forgotten when the map filled: seen again within the interval, it is queued again.
    recorder.seen(principals[0]!, clock.now());
    expect(recorder.pending).toBe(11);
  });

  it('a failed write is dropped, not retried forever, and the recorder keeps working', async () => {
    const clock = new ManualClock(Date.now());
    let fail = true;
    const written: number[] = [];
    const recorder = new LastUseRecorder({
      store: {
        recordLastUse: async (uses) => {
          if (fail) throw new Error('store down');
          written.push(uses.length);
        },
      },
      clock,
      logger: createLogger('error'),
      intervalMs: MINUTE,
      maxTokens: 10,
      batchSize: 10,
    });
    recorder.seen({ kind: 'oauth', subject: 's', tokenHash: hashToken('a') }, clock.now());
    await recorder.flush();
    expect(recorder.pending).toBe(0);
    fail = false;
    clock.advance(MINUTE);
    recorder.seen({ kind: 'oauth', subject: 's', tokenHash: hashToken('a') }, clock.now());
    await recorder.flush();
    expect(written).toEqual([1]);
  });
});
