// Session and task handles claimed and cleared by transitions on the keyspace port
// (src/store/handles/transitions.ts), raced: from 8 sidecars on one real Redis (each its own store
// object and connections), and as exact interleavings on both engines, another writer's change made
// between a transition's read and its plan (each one a guard of the plan is there for).

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { systemClock } from '../../src/model/clock.ts';
import { handleDigest, handleOwner } from '../../src/proxy/handles.ts';
import { claimHandle, forgetHandle, forgetIndexedHandles, type HandleClaim } from '../../src/store/handles/transitions.ts';
import type { Keyspace } from '../../src/store/keyspace.ts';
import { MemoryCore } from '../../src/store/memory-core.ts';
import { keyLayout, type KeyLayout } from '../../src/store/records.ts';
import { RedisKeyspace } from '../../src/store/redis-keyspace.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import type { HandleOwner } from '../../src/store/types.ts';
import { deleteUnder, openRedisStores, rawRedis, uniquePrefix } from '../support/redis.ts';

const SIDECARS = 8;
const TTL = 60_000;

let prefix: string;
let raw: Redis;

beforeEach(async () => {
  prefix = uniquePrefix('handle-races');
  raw = await rawRedis();
});
afterEach(async () => {
  try {
    await deleteUnder(raw, prefix);
  } finally {
    await raw.quit();
  }
});

const alice = handleOwner({ kind: 'oauth', subject: 'alice', clientId: 'c-a' });
const bob = handleOwner({ kind: 'oauth', subject: 'bob', clientId: 'c-b' });

describe('handles claimed from 8 sidecars at once', () => {
  let sidecars: RedisTokenStore[];
  beforeEach(async () => {
    sidecars = await openRedisStores(prefix, SIDECARS);
  });
  afterEach(async () => {
    await Promise.all(sidecars.map((s) => s.close()));
  });

  it('first presentations of one handle by 8 owners: exactly one binds it, the 7 others find it foreign', async () => {
    const owners = sidecars.map((_, i) => handleOwner({ kind: 'oauth', subject: `person-${i}`, clientId: `c-${i}` }));
    const now = Date.now();
    for (let round = 0; round < 20; round++) {
      const hash = handleDigest(`contested-${round}`);
      const outcomes = await Promise.all(sidecars.map((s, i) => s.bindHandle('session', hash, owners[i]!, now, TTL, 100)));
      expect(outcomes.filter((o) => o === 'bound')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'foreign')).toHaveLength(SIDECARS - 1);
      const winner = owners[outcomes.indexOf('bound')]!;
      expect(await raw.hget(sidecars[0]!.keys.handle('session', hash), 'owner')).toBe(winner.id);
      for (const [i, owner] of owners.entries()) {
        const listed = await raw.zscore(sidecars[0]!.keys.handlesByClient(owner.clientId!), `session:${hash}`);
        expect(listed === null).toBe(owner !== winner);
        expect(await sidecars[i]!.useHandle('session', hash, owner, now, TTL, 100)).toBe(owner === winner ? 'owned' : 'foreign');
      }
    }
  });

  it("64 handles bound for one owner with at most 5: each index keeps 5, 5 handles remain, another owner's are untouched", async () => {
    const MAX = 5;
    const now = Date.now();
    const bobs = Array.from({ length: 4 }, (_, i) => handleDigest(`bob-${i}`));
    for (const hash of bobs) await sidecars[0]!.bindHandle('session', hash, bob, now, TTL, MAX);
    const mine = Array.from({ length: 64 }, (_, i) => handleDigest(`alice-${i}`));
    // 8 at a time (one per sidecar): each lost race is another's win, so none loses more than 7.
    for (let round = 0; round < mine.length / SIDECARS; round++) {
      const batch = mine.slice(round * SIDECARS, (round + 1) * SIDECARS);
      const outcomes = await Promise.all(batch.map((hash, i) => sidecars[i]!.bindHandle('session', hash, alice, now + round, TTL, MAX)));
      expect(outcomes.every((o) => o === 'bound')).toBe(true);
      expect(await raw.zcard(sidecars[0]!.keys.handlesByClient('c-a'))).toBeLessThanOrEqual(MAX);
    }
    const keys = sidecars[0]!.keys;
    const byClient = await raw.zrange(keys.handlesByClient('c-a'), 0, -1);
    const bySubject = await raw.zrange(keys.handlesBySubject(alice.subjectHash!), 0, -1);
    expect(byClient).toHaveLength(MAX);
    expect(bySubject).toHaveLength(MAX);
    const left = [];
    for (const hash of mine) if ((await raw.exists(keys.handle('session', hash))) === 1) left.push(`session:${hash}`);
    expect(left.sort()).toEqual([...byClient].sort());
    expect([...bySubject].sort()).toEqual([...byClient].sort());
    for (const hash of bobs) expect(await sidecars[1]!.useHandle('session', hash, bob, now, TTL, MAX)).toBe('owned');
  });

  it('200 new sessions of one client at once, with room for all: every one bound, none refused for contention', async () => {
    // One client's index is shared by everyone using that client (a service, a client metadata
    // document's URL): a burst of new sessions must not retry each other while there is room.
    const carol = handleOwner({ kind: 'oauth', subject: 'carol', clientId: 'c-busy' });
    const now = Date.now();
    const hashes = Array.from({ length: 200 }, (_, i) => handleDigest(`busy-${i}`));
    const outcomes = await Promise.allSettled(
      hashes.map((hash, i) => sidecars[i % SIDECARS]!.bindHandle('session', hash, carol, now, TTL, 1000)),
    );
    expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([]);
    expect(outcomes.map((o) => (o as PromiseFulfilledResult<string>).value)).toEqual(hashes.map(() => 'bound'));
    expect(await raw.zcard(sidecars[0]!.keys.handlesByClient('c-busy'))).toBe(200);
  });
});

/**
 * A keyspace that lets `meanwhile` write once, between a transition's first decision and its plan;
 * `written` counts its plans applied (their guards held).
 */
function interleaved(keyspace: Keyspace, meanwhile: () => Promise<unknown>): Keyspace & { written: number } {
  let pending: (() => Promise<unknown>) | undefined = meanwhile;
  return {
    written: 0,
    read: (commands) => keyspace.read(commands),
    async apply(plan) {
      const run = pending;
      pending = undefined;
      if (run) await run();
      const replies = await keyspace.apply(plan);
      if (replies !== null) this.written++;
      return replies;
    },
  };
}

describe.each(['redis', 'memory'] as const)('handle transitions with another write between the read and the plan (%s)', (engine) => {
  let ks: Keyspace;
  let keys: KeyLayout;
  beforeEach(() => {
    keys = keyLayout(prefix);
    ks = engine === 'redis' ? new RedisKeyspace(raw) : new MemoryCore({ clock: systemClock, keyPrefix: prefix }).keyspace;
  });
  const claim = (hash: string, owner: HandleOwner, now: number, maxPerOwner: number, via = ks) =>
    claimHandle(via, keys, { bind: true, kind: 'session', handleHash: hash, owner, now, ttlMs: TTL, maxPerOwner } satisfies HandleClaim);
  const ownerOf = async (hash: string) => (await ks.read([['HGET', keys.handle('session', hash), 'owner']]))[0];
  const listed = async (index: string) => (await ks.read([['ZRANGE', index, 0, -1]]))[0] as string[];

  it("an evicted handle rebound to another owner meanwhile (its member still listed) is that owner's and stays", async () => {
    const [h1, h2, h3] = ['e1', 'e2', 'e3'].map(handleDigest) as [string, string, string];
    const now = Date.now();
    await claim(h1, alice, now, 2);
    await claim(h2, alice, now + 1, 2);
    // h1, the least recently used, expires and bob binds it: alice's indexes still list it.
    const rebind = async () => {
      await ks.apply({ guards: [], steps: [['DEL', keys.handle('session', h1)]] });
      expect(await claim(h1, bob, now + 2, 2)).toBe('bound');
    };
    expect(await claim(h3, alice, now + 2, 2, interleaved(ks, rebind))).toBe('bound');
    expect(await ownerOf(h1)).toBe(bob.id);
    expect(await listed(keys.handlesByClient('c-a'))).toEqual([`session:${h2}`, `session:${h3}`]);
  });

  it('an expired member dropped and another listed meanwhile (the size unchanged): the index still holds at most the limit', async () => {
    const [h1, h2, h3, h4] = ['x1', 'x2', 'x3', 'x4'].map(handleDigest) as [string, string, string, string];
    const now = Date.now();
    // h1 expires at now - 10; h2, bound before that, leaves it listed.
    await claim(h1, alice, now - TTL - 10, 2);
    await claim(h2, alice, now - 20, 2);
    // Another claim drops h1 (expired) and lists h4: two members before, two after.
    const other = () => claim(h4, alice, now + 1, 2);
    expect(await claim(h3, alice, now, 2, interleaved(ks, other))).toBe('bound');
    for (const index of [keys.handlesByClient('c-a'), keys.handlesBySubject(alice.subjectHash!)])
      expect(await listed(index)).toEqual([`session:${h3}`, `session:${h4}`]);
    expect(await ownerOf(h2)).toBeNull();
  });

  it("a renewed handle's member dropped meanwhile by a replica whose clock is ahead: listed again within the limit", async () => {
    const [h1, h2] = ['r1', 'r2'].map(handleDigest) as [string, string];
    const now = Date.now();
    await claim(h1, alice, now - TTL / 2, 1);
    // A replica's clock at h1's expiry drops it and lists h2.
    const ahead = () => claim(h2, alice, now + TTL / 2, 1);
    expect(await claim(h1, alice, now, 1, interleaved(ks, ahead))).toBe('owned');
    for (const index of [keys.handlesByClient('c-a'), keys.handlesBySubject(alice.subjectHash!)])
      expect(await listed(index)).toEqual([`session:${h1}`]);
  });

  it('a handle forgotten and bound by another owner between the read and the plan (its renewedAt alike): the claim finds it foreign', async () => {
    const h1 = handleDigest('taken');
    const now = Date.now();
    await claim(h1, alice, now - TTL / 2, 100);
    const rebind = async () => {
      await ks.apply({ guards: [], steps: [['DEL', keys.handle('session', h1)]] });
      expect(await claim(h1, bob, now - TTL / 2, 100)).toBe('bound');
    };
    expect(await claim(h1, alice, now, 100, interleaved(ks, rebind))).toBe('foreign');
    expect(await ownerOf(h1)).toBe(bob.id);
    expect(await listed(keys.handlesByClient('c-a'))).toEqual([`session:${h1}`]);
    expect(await ks.read([['HGET', keys.handle('session', h1), 'renewedAt']])).toEqual([String(now - TTL / 2)]);
  });

  it('a handle of an owner listed nowhere renewed twice at once: the renewal that finds it renewed writes nothing', async () => {
    const master: HandleOwner = { id: '["master","master",null]' };
    const h1 = handleDigest('unlisted');
    const now = Date.now();
    await claim(h1, master, now - TTL / 2, 100);
    const via = interleaved(ks, () => claim(h1, master, now, 100));
    expect(await claim(h1, master, now, 100, via)).toBe('owned');
    expect(via.written).toBe(0);
  });

  it("a handle forgotten while it was forgotten and bound by another owner: that owner's members go with it", async () => {
    const h1 = handleDigest('ended');
    const now = Date.now();
    await claim(h1, alice, now, 100);
    const rebind = async () => {
      expect(await forgetHandle(ks, keys, 'session', h1)).toBe(true);
      expect(await claim(h1, bob, now, 100)).toBe('bound');
    };
    expect(await forgetHandle(interleaved(ks, rebind), keys, 'session', h1)).toBe(true);
    expect(await ownerOf(h1)).toBeNull();
    for (const index of [keys.handlesByClient('c-b'), keys.handlesBySubject(bob.subjectHash!), keys.handlesByClient('c-a')])
      expect(await listed(index)).toEqual([]);
  });

  it('a renewal racing another renewal of the same handle: the one that finds it renewed writes nothing', async () => {
    const h1 = handleDigest('twice');
    const now = Date.now();
    await claim(h1, alice, now - TTL / 2, 100);
    const via = interleaved(ks, () => claim(h1, alice, now, 100));
    expect(await claim(h1, alice, now, 100, via)).toBe('owned');
    expect(via.written).toBe(0);
  });

  it('a stale member (a handle now of another owner) evicted meanwhile by another claim: the index still holds at most the limit', async () => {
    const [x, h2, h3, h4] = ['s1', 's2', 's3', 's4'].map(handleDigest) as [string, string, string, string];
    const now = Date.now();
    await claim(x, alice, now, 2);
    await ks.apply({ guards: [], steps: [['DEL', keys.handle('session', x)]] });
    expect(await claim(x, bob, now, 2)).toBe('bound');
    await claim(h2, alice, now + 1, 2);
    // Both claims evict the stale member x (leaving bob's handle) and list their own: only one may.
    const other = () => claim(h4, alice, now + 2, 2);
    expect(await claim(h3, alice, now + 2, 2, interleaved(ks, other))).toBe('bound');
    for (const index of [keys.handlesByClient('c-a'), keys.handlesBySubject(alice.subjectHash!)])
      expect(await listed(index)).toHaveLength(2);
    expect(await ownerOf(x)).toBe(bob.id);
  });

  it('an index cleared while another handle is bound: that one is forgotten too', async () => {
    const [h1, h2] = ['b1', 'b2'].map(handleDigest) as [string, string];
    const now = Date.now();
    await claim(h1, alice, now, 100);
    const index = keys.handlesBySubject(alice.subjectHash!);
    const other = () => claim(h2, alice, now, 100);
    expect(await forgetIndexedHandles(interleaved(ks, other), keys, index, 'subjectHash', alice.subjectHash!)).toBe(2);
    expect(await ownerOf(h2)).toBeNull();
    expect(await listed(index)).toEqual([]);
  });

  it('an index cleared while one member was replaced by another (the size unchanged): the new one is forgotten too', async () => {
    const [h1, h2, h3] = ['f1', 'f2', 'f3'].map(handleDigest) as [string, string, string];
    const now = Date.now();
    // h1 expires at now - 10; h2, bound before that, leaves it listed.
    await claim(h1, alice, now - TTL - 10, 100);
    await claim(h2, alice, now - 20, 100);
    const index = keys.handlesBySubject(alice.subjectHash!);
    const other = () => claim(h3, alice, now, 100);
    expect(await forgetIndexedHandles(interleaved(ks, other), keys, index, 'subjectHash', alice.subjectHash!)).toBe(2);
    expect(await ownerOf(h3)).toBeNull();
    expect(await listed(index)).toEqual([]);
  });

  it("an index cleared while a handle it lists expired and was bound by another owner: that owner's handle stays", async () => {
    const [h1, h2] = ['g1', 'g2'].map(handleDigest) as [string, string];
    const now = Date.now();
    await claim(h1, alice, now, 100);
    await claim(h2, alice, now, 100);
    const index = keys.handlesBySubject(alice.subjectHash!);
    const rebind = async () => {
      await ks.apply({ guards: [], steps: [['DEL', keys.handle('session', h1)]] });
      expect(await claim(h1, bob, now, 100)).toBe('bound');
    };
    expect(await forgetIndexedHandles(interleaved(ks, rebind), keys, index, 'subjectHash', alice.subjectHash!)).toBe(1);
    expect(await ownerOf(h1)).toBe(bob.id);
    expect(await ownerOf(h2)).toBeNull();
  });
});
