// Which addresses a listener address reaches: loopback (this host only), private (a pod, VPC or home
// network: RFC 1918, RFC 4193 unique-local, link-local, CGNAT) or public. Used to warn when the admin
// listener is reachable from a public address.

import { BlockList, isIP } from 'node:net';
import type { NetworkInterfaceInfo } from 'node:os';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

const PRIVATE = new BlockList();
for (const [net, bits] of [['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['169.254.0.0', 16], ['100.64.0.0', 10]] as const) PRIVATE.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['fc00::', 7], ['fe80::', 10]] as const) PRIVATE.addSubnet(net, bits, 'ipv6');

function family(address: string): 'ipv4' | 'ipv6' | undefined {
  const v = isIP(address);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/** `localhost`, 127.0.0.0/8 or ::1 (an IPv4-mapped ::ffff:127.x too); brackets around IPv6 allowed. */
export function isLoopbackHost(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (h.toLowerCase() === 'localhost') return true;
  const f = family(h);
  return f !== undefined && LOOPBACK.check(h, f);
}

/** Loopback or a private range; false for the wildcard addresses (0.0.0.0, ::), which reach every interface. */
export function isLoopbackOrPrivate(host: string): boolean {
  if (isLoopbackHost(host)) return true;
  const f = family(host);
  return f !== undefined && PRIVATE.check(host, f);
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
