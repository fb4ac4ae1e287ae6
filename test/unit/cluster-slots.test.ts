// The Cluster lookup cache's routing (src/store/cluster-slots.ts): slots by the Redis rule, the slot map
// from CLUSTER SLOTS (complete or refused), the master of a key, the probe key of every slot, and what
// counts as a topology change (the replies and the ioredis slot views that make the cache set up anew).

import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  agreesWithIoredis,
  CLUSTER_SLOT_COUNT,
  isTopologyReply,
  keySlot,
  masterOf,
  parseClusterSlots,
  sameSlotMap,
  slotProbeKey,
} from '../../src/store/cluster-slots.ts';
import { keyLayout } from '../../src/store/records.ts';

const A = ['10.0.0.1', 7000, 'a'.repeat(40)];
const B = ['10.0.0.2', 7001, 'b'.repeat(40)];
const C = ['10.0.0.3', 7002, 'c'.repeat(40)];

/** Three masters as `redis-cli --cluster create` splits the slots; B's range has a replica. */
function threeMasters(): unknown[] {
  return [
    [0, 5460, A],
    [5461, 10922, B, ['10.0.0.4', 7003, 'd'.repeat(40)]],
    [10923, 16383, C],
  ];
}

/** ioredis's Cluster#slots for a map: per slot, `host:port` of the master, then the replicas. */
function ioredisSlots(ranges: unknown[]): string[][] {
  const slots: string[][] = [];
  for (const [start, end, ...nodes] of ranges as Array<[number, number, ...Array<[string, number]>]>)
    for (let s = start; s <= end; s++) slots[s] = nodes.map(([host, port]) => `${host}:${port}`);
  return slots;
}

describe('slots and routing', () => {
  it('computes slots as Redis does (CRC16 mod 16384; a hash tag alone counts)', () => {
    // The values CLUSTER KEYSLOT answers (Redis documentation examples).
    expect(keySlot('somekey')).toBe(11058);
    expect(keySlot('foo{hash_tag}')).toBe(2515);
    expect(keySlot('bar{hash_tag}')).toBe(2515);
    // A token's two keys: the user-grade key by its whole name, the access-token key by its bucket's tag.
    const keys = keyLayout('mcpauth:');
    const hash = `ab${'0'.repeat(62)}`;
    expect(keySlot(keys.accessToken(hash))).toBe(keySlot('oauth:ab'));
    expect(keySlot(keys.userToken(hash))).toBe(keySlot(`mcpauth:userBearerTokens:${hash}`));
  });

  it('routes each slot to the master CLUSTER SLOTS names for it, replicas ignored', () => {
    const map = parseClusterSlots(threeMasters());
    expect(map.masters.map((m) => [m.host, m.port, m.id])).toEqual([A, B, C]);
    expect([map.owners[0], map.owners[5460], map.owners[5461], map.owners[10922], map.owners[10923], map.owners[16383]]).toEqual([
      0, 0, 1, 1, 2, 2,
    ]);
    expect(masterOf(map, 'somekey')).toBe(2); // slot 11058
    expect(masterOf(map, 'foo{hash_tag}')).toBe(0); // slot 2515
  });

  it('gathers a master that owns several ranges (after resharding) under one index', () => {
    const map = parseClusterSlots([
      [0, 99, A],
      [100, 199, B],
      [200, 16383, A],
    ]);
    expect(map.masters).toHaveLength(2);
    expect([map.owners[50], map.owners[150], map.owners[9000]]).toEqual([0, 1, 0]);
  });

  it('refuses a map with a slot unserved, or a reply it cannot read: the cache is not set up on it', () => {
    expect(() => parseClusterSlots([[0, 16382, A]])).toThrow(/a slot has no master/);
    expect(() => parseClusterSlots('ERR')).toThrow(TypeError);
    expect(() => parseClusterSlots([[0, 16384, A]])).toThrow(/out of bounds/);
    expect(() => parseClusterSlots([[0, 16383, ['10.0.0.1', 7000]]])).toThrow(/host, port and id/);
    expect(() => parseClusterSlots([[0, 16383, ['', 7000, 'a'.repeat(40)]]])).toThrow(/usable address/);
  });

  it('gives every slot a probe key in that slot, under the key prefix', () => {
    const keys = keyLayout('mcpauth:');
    for (let slot = 0; slot < CLUSTER_SLOT_COUNT; slot++) {
      const probe = slotProbeKey(keys.lookupCacheMarker(), slot, 'unused');
      expect(probe.startsWith('mcpauth:lookupCacheMarker:{')).toBe(true);
      if (keySlot(probe) !== slot) expect.fail(`probe key of slot ${slot} is in slot ${keySlot(probe)}`);
    }
  });

  it("falls back to the token's own key where the prefix's braces would move the probe key", () => {
    const keys = keyLayout('app{x');
    const userKey = keys.userToken('0'.repeat(64));
    const slot = keySlot(userKey);
    expect(slotProbeKey(keys.lookupCacheMarker(), slot, userKey)).toBe(userKey);
  });
});

describe('what makes the cache set up anew (fail closed)', () => {
  it('a redirection or a cluster not serving is a topology change; another error reply or a socket error is not', () => {
    for (const reply of [
      'MOVED 3999 10.0.0.2:7001',
      'ASK 3999 10.0.0.2:7001',
      'TRYAGAIN Multiple keys request during rehashing',
      'CLUSTERDOWN The cluster is down',
    ])
      expect(isTopologyReply(new ReplyError(reply))).toBe(true);
    expect(isTopologyReply(new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe(false);
    expect(isTopologyReply(new Error('MOVED 3999 10.0.0.2:7001'))).toBe(false);
    expect(isTopologyReply(undefined)).toBe(false);
  });

  it('an ioredis refresh that agrees with the map keeps the cache; any other master for any slot does not', () => {
    const ranges = threeMasters();
    const map = parseClusterSlots(ranges);
    expect(agreesWithIoredis(map, ioredisSlots(ranges))).toBe(true);
    // A failover: the replica of B's range is its master now.
    const failedOver = ioredisSlots(ranges);
    failedOver[7000] = ['10.0.0.4:7003', '10.0.0.2:7001'];
    expect(agreesWithIoredis(map, failedOver)).toBe(false);
    // One slot moved to another master.
    const moved = ioredisSlots(ranges);
    moved[16383] = ['10.0.0.1:7000'];
    expect(agreesWithIoredis(map, moved)).toBe(false);
    // A slot ioredis does not know a master for.
    const unknown = ioredisSlots(ranges);
    delete unknown[0];
    expect(agreesWithIoredis(map, unknown)).toBe(false);
  });

  it('a map read again after tracking was set up must give every slot the same master (id and address)', () => {
    const map = parseClusterSlots(threeMasters());
    expect(sameSlotMap(map, parseClusterSlots(threeMasters()))).toBe(true);
    const resharded = threeMasters();
    (resharded[0] as unknown[])[1] = 5459;
    (resharded[1] as unknown[])[0] = 5460;
    expect(sameSlotMap(map, parseClusterSlots(resharded))).toBe(false);
    // Same ranges, a restarted node with a new id at the same address.
    const renamed = threeMasters();
    (renamed[2] as unknown[])[2] = ['10.0.0.3', 7002, 'e'.repeat(40)];
    expect(sameSlotMap(map, parseClusterSlots(renamed))).toBe(false);
  });
});
