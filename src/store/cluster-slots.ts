// Redis Cluster's slot map as the Cluster lookup cache (redis-cluster-lookup-cache.ts) routes by: which
// master owns each of the 16 384 slots, read from CLUSTER SLOTS, and a probe key per slot whose EXISTS
// on a master answers MOVED or ASK as soon as that master no longer wholly owns the slot.

import calculateSlot from 'cluster-key-slot';
import { ReplyError } from 'ioredis';

export const CLUSTER_SLOT_COUNT = 16384;

export interface ClusterMaster {
  /** The node id (CLUSTER MYID on the node itself). */
  readonly id: string;
  readonly host: string;
  readonly port: number;
}

/** Every slot's master; built only from a reply that assigns every slot (a cluster with a slot unserved is not cached). */
export interface SlotMap {
  readonly masters: readonly ClusterMaster[];
  /** Per slot, the index in `masters` of its master. */
  readonly owners: Uint16Array;
}

/** The slot of a key, by the rule Redis and ioredis use (CRC16 of the key or of its hash tag). */
export function keySlot(key: string): number {
  return calculateSlot(key);
}

/**
 * The slot map from a CLUSTER SLOTS reply: `[start, end, [host, port, id, ...], replicas...]` per range.
 * Throws a TypeError when the reply is not of that shape, names a master without an id or address, or
 * leaves a slot without a master: the cache is then not set up.
 */
export function parseClusterSlots(reply: unknown): SlotMap {
  if (!Array.isArray(reply)) throw new TypeError('CLUSTER SLOTS: not an array');
  const masters: ClusterMaster[] = [];
  const byId = new Map<string, number>();
  const owners = new Uint16Array(CLUSTER_SLOT_COUNT);
  const assigned = new Uint8Array(CLUSTER_SLOT_COUNT);
  for (const range of reply) {
    if (!Array.isArray(range) || range.length < 3) throw new TypeError('CLUSTER SLOTS: a range is not [start, end, master, ...]');
    const [start, end, master] = range as [unknown, unknown, unknown];
    if (!Number.isInteger(start) || !Number.isInteger(end) || (start as number) < 0 || (end as number) >= CLUSTER_SLOT_COUNT)
      throw new TypeError('CLUSTER SLOTS: a range out of bounds');
    if (!Array.isArray(master) || master.length < 3) throw new TypeError('CLUSTER SLOTS: a master without host, port and id');
    const [host, port, id] = master.map((v: unknown) => (Buffer.isBuffer(v) ? v.toString() : v)) as [unknown, unknown, unknown];
    if (typeof host !== 'string' || host === '' || host === '?' || !Number.isInteger(port) || typeof id !== 'string' || id === '')
      throw new TypeError('CLUSTER SLOTS: a master without a usable address or id');
    let index = byId.get(id);
    if (index === undefined) {
      index = masters.push({ id, host, port: port as number }) - 1;
      byId.set(id, index);
    }
    for (let slot = start as number; slot <= (end as number); slot++) {
      owners[slot] = index;
      assigned[slot] = 1;
    }
  }
  if (assigned.includes(0)) throw new TypeError('CLUSTER SLOTS: a slot has no master');
  return { masters, owners };
}

/** The index in `map.masters` of the master owning `key`'s slot. */
export function masterOf(map: SlotMap, key: string): number {
  return map.owners[keySlot(key)]!;
}

/** Whether two slot maps give every slot the same master (same node id, same address). */
export function sameSlotMap(a: SlotMap, b: SlotMap): boolean {
  for (let slot = 0; slot < CLUSTER_SLOT_COUNT; slot++) {
    const x = a.masters[a.owners[slot]!]!;
    const y = b.masters[b.owners[slot]!]!;
    if (x.id !== y.id || x.host !== y.host || x.port !== y.port) return false;
  }
  return true;
}

/**
 * Whether ioredis's own view of the slots (Cluster#slots: per slot the `host:port` of its master first)
 * gives every slot the master the cache routes to. Checked at each of its refreshes: a failover or a
 * moved slot it learnt of changes the map, and the cache is set up anew.
 */
export function agreesWithIoredis(map: SlotMap, ioredisSlots: ReadonlyArray<readonly string[] | undefined>): boolean {
  for (let slot = 0; slot < CLUSTER_SLOT_COUNT; slot++) {
    const master = map.masters[map.owners[slot]!]!;
    if (ioredisSlots[slot]?.[0] !== `${master.host}:${master.port}`) return false;
  }
  return true;
}

/**
 * A reply that says the node does not (or no longer, or not wholly) serve the key's slot, or the
 * cluster is not serving: the slot map the cache routes by is stale, so it is set up anew.
 */
export function isTopologyReply(err: unknown): boolean {
  return err instanceof ReplyError && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/.test((err as Error).message);
}

/** Per slot, a short hash tag that falls in it (found once, by counting: about 170 000 CRC16s). */
let tagsBySlot: string[] | undefined;

function tagOf(slot: number): string {
  if (tagsBySlot === undefined) {
    const tags = new Array<string>(CLUSTER_SLOT_COUNT);
    let found = 0;
    for (let n = 0; found < CLUSTER_SLOT_COUNT; n++) {
      const tag = n.toString(36);
      const s = calculateSlot(tag);
      if (tags[s] === undefined) {
        tags[s] = tag;
        found++;
      }
    }
    tagsBySlot = tags;
  }
  return tagsBySlot[slot]!;
}

/**
 * The probe key of `slot`: `base` (a key name under the prefix) with a hash tag in `slot` appended, a
 * key the store never writes. An EXISTS of it on the master the cache routes the slot to answers 0
 * while that master owns the slot, MOVED once it does not (a failover made it a replica, the slot was
 * moved) and ASK while the slot is being moved away. `fallback`, a key known to be in `slot`, is used where the prefix's own braces would put the
 * probe key in another slot.
 */
export function slotProbeKey(base: string, slot: number, fallback: string): string {
  const key = `${base}:{${tagOf(slot)}}`;
  return keySlot(key) === slot ? key : fallback;
}
