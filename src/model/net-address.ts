// Addresses, defined once: which range an IP address belongs to (loopback, private, link-local, public
// and the other special-purpose ranges, as net.BlockList tables), which host names are loopback, how
// CIDRs and `host:port` forms are read, and which key a per-address limit counts an address under.
// The SSRF guard, the DNS-rebinding check, redirect URIs, the IdP's plain-http rule, trusted proxies,
// X-Forwarded-For, every per-address limit and the admin exposure warning all ask here.

import { BlockList, isIP } from 'node:net';
import type { NetworkInterfaceInfo } from 'node:os';

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

type Family = 'ipv4' | 'ipv6';

function familyOf(address: string): Family | undefined {
  const v = isIP(address);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/** `10.0.0.0/8`, `fd00::/8` or a single address (a full-length prefix); undefined when it is neither. */
export function parseCidr(entry: string): { address: string; prefix: number; family: Family } | undefined {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const family = familyOf(address);
  if (family === undefined) return undefined;
  const max = family === 'ipv4' ? 32 : 128;
  if (slash === -1) return { address, prefix: max, family };
  const bits = entry.slice(slash + 1);
  const prefix = Number(bits);
  return /^\d+$/.test(bits) && prefix <= max ? { address, prefix, family } : undefined;
}

/**
 * A BlockList of CIDRs or addresses (entries checked with parseCidr first; an invalid one throws). An
 * IPv4 entry also matches the IPv4-mapped IPv6 form of its addresses (`::ffff:10.1.2.3`), as Node's
 * BlockList does.
 */
export function addressList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const cidr = parseCidr(entry);
    if (cidr === undefined) throw new TypeError(`not an IP address or CIDR: ${entry}`);
    list.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }
  return list;
}

/** Whether `address` (an IP literal, unbracketed) is in `list`; false for anything that is not an IP. */
export function inAddressList(list: BlockList, address: string): boolean {
  const family = familyOf(address);
  return family !== undefined && list.check(address, family);
}

const LOOPBACK_V4 = '127.0.0.0/8';
const LOOPBACK_V6 = '::1/128';

// Most specific first: the first match wins.
const IPV4_RANGES: ReadonlyArray<readonly [AddressClass, readonly string[]]> = [
  ['unspecified', ['0.0.0.0/32']],
  ['broadcast', ['255.255.255.255/32']],
  ['this-network', ['0.0.0.0/8']],
  ['loopback', [LOOPBACK_V4]],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']],
  ['shared', ['100.64.0.0/10']],
  ['link-local', ['169.254.0.0/16']],
  // 192.0.0.0/24: IETF protocol assignments (DS-Lite, NAT64 discovery, ...); 192.88.99.0/24: deprecated 6to4 relay anycast.
  ['reserved', ['192.0.0.0/24', '192.88.99.0/24', '240.0.0.0/4']],
  ['documentation', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24']],
  ['benchmarking', ['198.18.0.0/15']],
  ['multicast', ['224.0.0.0/4']],
];

// IPv4 inside IPv6 reaches that IPv4 address: such an address is judged on the IPv4 it reaches.
// IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d,
// deprecated), and the well-known NAT64 prefix 64:ff9b::/96 (a NAT64 gateway forwards to the embedded address).
const EMBEDS_IPV4 = addressList(['::ffff:0:0/96', '::ffff:0:0:0/96', '::/96', '64:ff9b::/96']);

const IPV6_RANGES: ReadonlyArray<readonly [AddressClass, readonly string[]]> = [
  ['unspecified', ['::/128']],
  ['loopback', [LOOPBACK_V6]],
  // Local-use NAT64 (RFC 8215) translates into the operator's own network; unique local (fc00::/7);
  // the deprecated site-local (fec0::/10).
  ['private', ['64:ff9b:1::/48', 'fc00::/7', 'fec0::/10']],
  ['multicast', ['ff00::/8']],
  ['link-local', ['fe80::/10']],
  // 3fff::/20: RFC 9637.
  ['documentation', ['2001:db8::/32', '3fff::/20']],
  ['benchmarking', ['2001:2::/48']],
  // IETF protocol assignments (Teredo, ORCHID, ...) and 6to4 (deprecated; tunnels to embedded IPv4).
  ['reserved', ['2001::/23', '2002::/16']],
];

// Only 2000::/3 is allocated as global unicast; everything else (discard 100::/64, SRv6, unassigned) is not.
const GLOBAL_UNICAST_V6 = addressList(['2000::/3']);

function table(ranges: ReadonlyArray<readonly [AddressClass, readonly string[]]>): ReadonlyArray<readonly [AddressClass, BlockList]> {
  return ranges.map(([cls, cidrs]) => [cls, addressList(cidrs)] as const);
}

const IPV4_TABLE = table(IPV4_RANGES);
const IPV6_TABLE = table(IPV6_RANGES);
// An IPv4 entry of a BlockList also matches its IPv4-mapped form (::ffff:127.0.0.2).
const LOOPBACK = addressList([LOOPBACK_V4, LOOPBACK_V6]);

function classifyIpv4(address: string): AddressClass {
  for (const [cls, list] of IPV4_TABLE) if (list.check(address, 'ipv4')) return cls;
  return 'public';
}

/** The IPv4 address in the low 32 bits of an IPv6 address (checked with isIP; no zone index). */
function embeddedIpv4(address: string): string {
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) return dotted[1]!;
  const groups = address.split(':');
  const low = (g: string | undefined) => (g === undefined || g === '' ? 0 : parseInt(g, 16));
  const high = low(groups[groups.length - 2]);
  const last = low(groups[groups.length - 1]);
  return [high >> 8, high & 0xff, last >> 8, last & 0xff].join('.');
}

function classifyIpv6(address: string): AddressClass {
  // None of the embedding prefixes overlaps a range of the table but :: and ::1, which the table has first.
  for (const [cls, list] of IPV6_TABLE) if (list.check(address, 'ipv6')) return cls;
  if (EMBEDS_IPV4.check(address, 'ipv6')) return classifyIpv4(embeddedIpv4(address));
  return GLOBAL_UNICAST_V6.check(address, 'ipv6') ? 'public' : 'reserved';
}

/** Brackets of a URL host (`[::1]`) removed. */
function unbracketed(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** The class of an IPv4 or IPv6 address in textual form (as `socket.remoteAddress`, DNS or a URL host give it). */
export function classifyAddress(address: string): AddressClass {
  const text = unbracketed(address);
  const family = familyOf(text);
  if (family === 'ipv4') return classifyIpv4(text);
  // A zone index (`fe80::1%eth0`) names the interface, not the address.
  if (family === 'ipv6') return classifyIpv6(text.split('%')[0]!.toLowerCase());
  return 'invalid';
}

/**
 * `localhost`, or an address in 127.0.0.0/8 or ::1 (the IPv4-mapped `::ffff:127.x.y.z` too); brackets
 * around IPv6 allowed, as URL.hostname gives them. Subdomains of `localhost` are not: a resolver that
 * does not special-case them (RFC 6761 §6.3 asks it to, not every one does) sends them to DNS.
 */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const address = unbracketed(host);
  const family = familyOf(address);
  return family !== undefined && LOOPBACK.check(address, family);
}

const LOCAL_CLASSES: ReadonlySet<AddressClass> = new Set(['loopback', 'private', 'shared', 'link-local']);

/**
 * Loopback, or a network that is not the internet: private (RFC 1918, unique-local), CGNAT or
 * link-local. False for the wildcard addresses (0.0.0.0, ::), which reach every interface.
 */
export function isLoopbackOrPrivate(host: string): boolean {
  return isLoopbackHost(host) || LOCAL_CLASSES.has(classifyAddress(host));
}

/** `::ffff:1.2.3.4` (how a dual-stack socket reports an IPv4 peer) -> `1.2.3.4`; undefined -> ''. */
export function normalizeAddress(address: string | undefined): string {
  if (!address) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/** The default of rateLimits.ipv6PrefixLength: the /64 a subscriber, a VM or a container host is given. */
export const DEFAULT_IPV6_LIMIT_PREFIX = 64;

/** The eight 16-bit groups of an IPv6 address (checked with isIP; no zone index). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const high = parse(head);
  if (tail === undefined) return high;
  const low = parse(tail);
  return [...high, ...new Array<number>(8 - high.length - low.length).fill(0), ...low];
}

/**
 * The key a per-address limit counts `address` under (an address as `ClientAddresses.client` gives
 * it). IPv4 is the address itself, and so is an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, in either
 * spelling): one host. IPv6 is its network of `ipv6PrefixLength` bits, `2001:db8:0:7:0:0:0:0/64`:
 * a home, a VM or a container host is given a whole /64 and may send from any of its 2^64 addresses,
 * so counting each address on its own would leave a limit with no effect. Anything that is not an IP
 * address (no peer address) is returned as it is.
 */
export function limitKey(address: string, ipv6PrefixLength: number = DEFAULT_IPV6_LIMIT_PREFIX): string {
  const text = unbracketed(address).split('%')[0]!.toLowerCase();
  const family = familyOf(text);
  if (family === 'ipv4') return text;
  if (family !== 'ipv6') return address;
  const groups = ipv6Groups(text);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  const bits = Math.max(0, Math.min(128, ipv6PrefixLength));
  const masked = groups.map((g, i) => {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    return keep === 0 ? 0 : g & ((0xffff << (16 - keep)) & 0xffff);
  });
  return `${masked.map((g) => g.toString(16)).join(':')}/${bits}`;
}

/**
 * An IP address with an optional port, as proxies write X-Forwarded-For entries: `203.0.113.5`,
 * `203.0.113.5:4711`, `2001:db8::1`, `[2001:db8::1]` or `[2001:db8::1]:443` (Azure Application Gateway
 * and IIS append the client's port). The address, normalised; undefined when the entry is not one of
 * these forms (a name, `unknown`, an obfuscated RFC 7239 identifier, a port out of range).
 */
export function addressWithOptionalPort(entry: string): string | undefined {
  const text = entry.trim();
  let address: string;
  let port: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close === -1) return undefined;
    address = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) return undefined;
    if (rest !== '') port = rest.slice(1);
    if (isIP(address) !== 6) return undefined;
  } else {
    const colon = text.indexOf(':');
    // Two colons or more: an unbracketed IPv6 address, which cannot carry a port.
    if (colon !== -1 && text.indexOf(':', colon + 1) === -1) {
      address = text.slice(0, colon);
      port = text.slice(colon + 1);
      if (isIP(address) !== 4) return undefined;
    } else {
      address = text;
      if (isIP(address) === 0) return undefined;
    }
  }
  if (port !== undefined && !(/^\d{1,5}$/.test(port) && Number(port) <= 65535)) return undefined;
  return normalizeAddress(address.toLowerCase());
}

type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

/**
 * The public addresses a listener bound to `bound` (an address as `server.address()` gives it) can be
 * reached on: `bound` itself when it is public, or, for a wildcard (0.0.0.0, ::), every public address
 * of this machine's interfaces. Empty when it is loopback or private only (a pod or container network).
 */
export function publicReach(bound: string, interfaces: Interfaces): string[] {
  const wildcard = bound === '0.0.0.0' || bound === '::' || bound === '';
  if (!wildcard) return isLoopbackOrPrivate(bound) ? [] : [bound];
  const out: string[] = [];
  for (const list of Object.values(interfaces)) {
    for (const info of list ?? []) {
      // 0.0.0.0 takes IPv4 only; :: takes both (dual stack, the default on Linux).
      if (info.internal || (bound === '0.0.0.0' && info.family !== 'IPv4')) continue;
      if (!isLoopbackOrPrivate(info.address)) out.push(info.address);
    }
  }
  return out;
}
