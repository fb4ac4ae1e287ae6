// The client's address as the proxy listener sees it: the TCP peer, or, when the peer is one of
// `proxy.trustedProxies`, the last address that proxy appended to X-Forwarded-For. One function for
// every per-address decision (failed-auth limit, registration limit, token-endpoint fallback key).

import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';

export interface ClientAddresses {
  /** The peer, normalised (`::ffff:1.2.3.4` -> `1.2.3.4`). */
  peer(req: IncomingMessage): string;
  /** True when `peer` (as `peer()` gives it) is a configured trusted proxy. */
  trusts(peer: string): boolean;
  /** The peer, or the address a trusted proxy in front of us appended last. */
  client(req: IncomingMessage): string;
}

export function clientAddresses(trustedProxies: readonly string[]): ClientAddresses {
  const trusted = new BlockList();
  for (const entry of trustedProxies) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) trusted.addAddress(address, family);
    else trusted.addSubnet(address, Number(bits), family);
  }
  const any = trustedProxies.length > 0;
  const peer = (req: IncomingMessage) => normalizeAddress(req.socket.remoteAddress);
  const trusts = (remote: string) => any && remote !== '' && trusted.check(remote, isIP(remote) === 6 ? 'ipv6' : 'ipv4');
  return {
    peer,
    trusts,
    client(req) {
      const remote = peer(req);
      if (!trusts(remote)) return remote;
      const forwarded = req.headers['x-forwarded-for'];
      const last = typeof forwarded === 'string' ? forwarded.slice(forwarded.lastIndexOf(',') + 1).trim() : '';
      return isIP(last) ? last : remote;
    },
  };
}

export function normalizeAddress(address: string | undefined): string {
  if (!address) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
