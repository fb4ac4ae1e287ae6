// Hop-by-hop headers (RFC 9110 §7.6.1): meant for one connection, never forwarded. Besides the
// standard set, a client may name any header in `Connection`; those are removed too, before the
// sidecar sets its own headers, so a client's `Connection` can never remove what the sidecar states.

import type { IncomingHttpHeaders } from 'node:http';

/** Always hop-by-hop. `upgrade` included: MCP's HTTP transport has none to forward. */
const STANDARD = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade'] as const;
const STANDARD_SET: ReadonlySet<string> = new Set(STANDARD);

/** Whether a (lowercase) header name is one of the standard hop-by-hop headers. */
export function isHopByHop(name: string): boolean {
  return STANDARD_SET.has(name);
}

/**
 * Message framing stays Node's business: a `Connection` naming these would leave the upstream to
 * guess the body's length, so they are never removed on a client's say-so.
 */
const FRAMING = new Set(['host', 'content-length', 'transfer-encoding']);

/** Removes the standard hop-by-hop headers and every header the client names in `Connection`. */
export function removeHopByHop(headers: IncomingHttpHeaders): void {
  const connection = headers.connection;
  if (connection !== undefined) for (const name of connectionOptions(connection)) delete headers[name];
  for (const name of STANDARD) if (headers[name] !== undefined) delete headers[name];
}

/** The (lowercase) header names a `Connection` value declares hop-by-hop, framing headers excepted. */
export function connectionOptions(connection: string): string[] {
  // Nearly every peer sends only `keep-alive` or `close`: nothing to parse then.
  if (isPlain(connection)) return [];
  const names: string[] = [];
  for (const option of connection.split(',')) {
    const name = option.trim().toLowerCase();
    if (name !== '' && !FRAMING.has(name)) names.push(name);
  }
  return names;
}

function isPlain(value: string): boolean {
  return value === 'keep-alive' || value === 'close' || value === 'Keep-Alive' || value === 'Close';
}
