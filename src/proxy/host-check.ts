// DNS rebinding defence for /mcp and /health. The forwarder sends the upstream its own Host, so an
// upstream's Host/Origin validation (what the MCP spec asks of servers a browser can reach) never sees
// what the client sent: the sidecar checks it itself, before any token lookup. Host must name this
// sidecar (PUBLIC_URL's host, proxy.allowedHosts, or a loopback name when the listener is loopback or
// PUBLIC_URL is the default localhost one): otherwise 421. An Origin, when present, must be
// PUBLIC_URL's origin or in proxy.allowedOrigins (loopback origins under the same loopback rule): otherwise 403.

import type { IncomingMessage } from 'node:http';
import { HttpError } from '../http/errors.ts';
import { isLoopbackHost } from '../model/net-address.ts';

export interface HostCheckOptions {
  /** PUBLIC_URL as configured; undefined: the default http://localhost:<port>. */
  publicUrl: string | undefined;
  listenHost: string;
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
}

/** Host without its port, lower case (`[::1]:8080` -> `[::1]`). */
function hostName(host: string): string {
  const h = host.toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.hostname);
  } catch {
    return false;
  }
}

/** Throws the HttpError to answer (421, 403) when the request's Host or Origin is not this sidecar's. */
export type HostCheck = (req: IncomingMessage, host?: string) => void;

/**
 * Builds the check once; per request it costs a Set lookup on the raw Host (a small cache of accepted
 * values). `host` is the Host the client asked for: the request's own, or the one a forward-auth
 * ingress states.
 */
export function createHostCheck(options: HostCheckOptions): HostCheck {
  const hosts = new Set(options.allowedHosts.map((h) => hostName(h)));
  const origins = new Set(options.allowedOrigins.map((o) => o.toLowerCase().replace(/\/+$/, '')));
  if (options.publicUrl !== undefined) {
    const url = new URL(options.publicUrl);
    hosts.add(url.hostname.toLowerCase());
    origins.add(url.origin.toLowerCase());
  }
  const loopbackAllowed = options.publicUrl === undefined || isLoopbackHost(options.listenHost);
  const accepted = new Set<string>();

  return (req, host = req.headers.host) => {
    if (host === undefined || !accepted.has(host)) {
      const name = host === undefined ? '' : hostName(host);
      if (!(hosts.has(name) || (loopbackAllowed && isLoopbackHost(name)))) {
        throw new HttpError(
          'misdirected_request',
          'this server does not answer for that Host (DNS rebinding protection; see proxy.allowedHosts)',
        );
      }
      if (accepted.size < 64) accepted.add(host!);
    }
    const origin = req.headers.origin;
    if (origin === undefined) return;
    const o = origin.toLowerCase();
    if (origins.has(o) || (loopbackAllowed && isLoopbackOrigin(o))) return;
    throw new HttpError('forbidden', 'requests from that Origin are not allowed (see proxy.allowedOrigins)');
  };
}
