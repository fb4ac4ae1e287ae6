// The client's address as the proxy listener sees it: the TCP peer, or, when the peer is one of
// `proxy.trustedProxies`, the last address that proxy appended to X-Forwarded-For. One function for
// every per-address decision (failed-auth limit, registration limit, token-endpoint fallback key).

import type { IncomingMessage } from 'node:http';
import { addressList, addressWithOptionalPort, inAddressList, normalizeAddress } from '../model/net-address.ts';

export interface ClientAddresses {
  /** The peer, normalised (`::ffff:1.2.3.4` -> `1.2.3.4`). */
  peer(req: IncomingMessage): string;
  /** True when `peer` (as `peer()` gives it) is a configured trusted proxy. */
  trusts(peer: string): boolean;
  /** The peer, or the address a trusted proxy in front of us appended last (with its port, if any, dropped). */
  client(req: IncomingMessage): string;
}

export function clientAddresses(trustedProxies: readonly string[]): ClientAddresses {
  const trusted = addressList(trustedProxies);
  const any = trustedProxies.length > 0;
  const peer = (req: IncomingMessage) => normalizeAddress(req.socket.remoteAddress);
  const trusts = (remote: string) => any && inAddressList(trusted, remote);
  return {
    peer,
    trusts,
    client(req) {
      const remote = peer(req);
      if (!trusts(remote)) return remote;
      const forwarded = req.headers['x-forwarded-for'];
      const last = typeof forwarded === 'string' ? addressWithOptionalPort(forwarded.slice(forwarded.lastIndexOf(',') + 1)) : undefined;
      return last ?? remote;
    },
  };
}
