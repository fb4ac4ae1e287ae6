// The part of cluster-key-slot (the hash slot rule ioredis routes by) the Cluster lookup cache uses;
// the package ships no types.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0-16383) of a key: CRC16 of the key, or of its `{hash tag}`. */
  export default function calculateSlot(key: string): number;
}
