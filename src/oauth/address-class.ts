// Which IP addresses are public: the SSRF guard of every fetch whose URL a client chooses (Client ID
// Metadata Documents). Anything that is not plainly a global unicast address is refused, by range.

import { isIP } from 'node:net';

/** `public`, or the special-purpose range an address belongs to (IANA IPv4/IPv6 special registries). */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'this-network'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'benchmarking'
  | 'reserved'
  | 'invalid';

/** How an error page names a refused range (never the address itself). */
export const ADDRESS_CLASS_NAMES: Readonly<Record<Exclude<AddressClass, 'public'>, string>> = {
  unspecified: 'an unspecified address',
  'this-network': 'a "this network" address (0.0.0.0/8)',
  loopback: 'a loopback address',
  private: 'a private address',
  shared: 'a carrier-grade NAT address (100.64.0.0/10)',
  'link-local': 'a link-local address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  documentation: 'a documentation address',
  benchmarking: 'a benchmarking address',
  reserved: 'a reserved address',
  invalid: 'something that is not an IP address',
};

type V4Range = readonly [base: string, bits: number, cls: AddressClass];

// Most specific first: the first match wins.
const V4_RANGES: readonly V4Range[] = [
  ['0.0.0.0', 32, 'unspecified'],
  ['255.255.255.255', 32, 'broadcast'],
  ['0.0.0.0', 8, 'this-network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  // IETF protocol assignments (DS-Lite, NAT64 discovery, ...): nothing to fetch a document from.
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'documentation'],
  // Deprecated 6to4 relay anycast.
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

function v4ToNumber(address: string): number {
  const parts = address.split('.').map(Number);
  return ((parts[0]! * 256 + parts[1]!) * 256 + parts[2]!) * 256 + parts[3]!;
}

const V4_TABLE = V4_RANGES.map(([base, bits, cls]) => ({ base: v4ToNumber(base), size: 2 ** (32 - bits), cls }));

function classifyV4Number(n: number): AddressClass {
  for (const r of V4_TABLE) if (n >= r.base && n < r.base + r.size) return r.cls;
  return 'public';
}

/** Eight 16-bit groups; the caller has checked the text with isIP (a zone index `%eth0` is dropped). */
function v6Groups(address: string): number[] {
  let text = address.split('%')[0]!;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4ToNumber(dotted[1]!);
    text = `${text.slice(0, dotted.index)}${Math.floor(n / 65536).toString(16)}:${(n % 65536).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (s: string | undefined) => (s === undefined || s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function embeddedV4(groups: readonly number[]): number {
  return groups[6]! * 65536 + groups[7]!;
}

function classifyV6(g: readonly number[]): AddressClass {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 8)) return 'unspecified';
  if (zeros(0, 7) && g[7] === 1) return 'loopback';
  // IPv4 inside IPv6 reaches that IPv4 address: judge the address it reaches. IPv4-mapped
  // (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d, deprecated),
  // and the well-known NAT64 prefix 64:ff9b::/96 (a NAT64 gateway forwards to the embedded address).
  if (zeros(0, 5) && g[5] === 0xffff) return classifyV4Number(embeddedV4(g));
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return classifyV4Number(embeddedV4(g));
  if (zeros(0, 6)) return classifyV4Number(embeddedV4(g));
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return classifyV4Number(embeddedV4(g));
  // Local-use NAT64 (RFC 8215): translates into the operator's own network.
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private';
  const first = g[0]!;
  if ((first & 0xff00) === 0xff00) return 'multicast';
  if ((first & 0xffc0) === 0xfe80) return 'link-local';
  // Unique local (fc00::/7) and the deprecated site-local (fec0::/10).
  if ((first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfec0) return 'private';
  if (first === 0x2001 && g[1] === 0x0db8) return 'documentation';
  // 3fff::/20 (RFC 9637): 3fff:0000:: .. 3fff:0fff::.
  if (first === 0x3fff && (g[1]! & 0xf000) === 0) return 'documentation';
  if (first === 0x2001 && g[1] === 0x0002 && g[2] === 0) return 'benchmarking';
  // IETF protocol assignments (Teredo, ORCHID, ...) and 6to4 (deprecated; tunnels to embedded IPv4).
  if (first === 0x2001 && g[1]! < 0x0200) return 'reserved';
  if (first === 0x2002) return 'reserved';
  // Only 2000::/3 is allocated as global unicast; everything else (discard 100::/64, SRv6, unassigned) is not.
  if ((first & 0xe000) !== 0x2000) return 'reserved';
  return 'public';
}

/** The class of an IPv4 or IPv6 address in textual form (as `socket.remoteAddress` or DNS give it). */
export function classifyAddress(address: string): AddressClass {
  const text = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const family = isIP(text);
  if (family === 4) return classifyV4Number(v4ToNumber(text));
  if (family === 6) return classifyV6(v6Groups(text));
  return 'invalid';
}
