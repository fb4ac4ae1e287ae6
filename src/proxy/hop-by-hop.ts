// Hop-by-hop headers (RFC 9110 §7.6.1): meant for one connection, never forwarded. Besides the
// standard set, a client may name any header in `Connection`; those are removed too, before the
// sidecar sets its own headers, so a client's `Connection` can never remove what the sidecar states.

import type { IncomingHttpHeaders } from 'node:http';

/** Always hop-by-hop. `upgrade` included: MCP's HTTP transport has none to forward. */
const STANDARD = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade'] as const;

/**
 * Message framing stays Node's business: a `Connection` naming these would leave the upstream to
 * guess the body's length, so they are never removed on a client's say-so.
 */
const FRAMING = new Set(['host', 'content-length', 'transfer-encoding']);

/** Removes the standard hop-by-hop headers and every header the client names in `Connection`. */
export function removeHopByHop(headers: IncomingHttpHeaders): void {
  const connection = headers.connection;
  // Nearly every client sends only `keep-alive` or `close`: nothing to parse then.
  if (connection !== undefined && !isPlain(connection)) {
    for (const option of connection.split(',')) {
      const name = option.trim().toLowerCase();
      if (name !== '' && !FRAMING.has(name)) delete headers[name];
    }
  }
  for (const name of STANDARD) if (headers[name] !== undefined) delete headers[name];
}

function isPlain(value: string): boolean {
  return value === 'keep-alive' || value === 'close' || value === 'Keep-Alive' || value === 'Close';
}
