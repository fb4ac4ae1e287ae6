// The call a POST /mcp makes, read from its headers alone: what forward-auth decides on, the body going
// from the ingress to the upstream without passing through the sidecar. MCP's 2026-07-28 transport
// (SEP-2243) mirrors the JSON-RPC method into `Mcp-Method` and the tool, prompt or resource into
// `Mcp-Name`, and a server on that revision must refuse a request whose headers disagree with its body.
// Earlier revisions send neither, so with a policy a request that cannot be decided is refused, never
// let through undecided.

import type { IncomingMessage } from 'node:http';
import { HttpError } from '../http/errors.ts';
import { NAME_BEARING_METHODS, type PolicyRequest } from './rules.ts';

/** The first MCP revision whose clients send `Mcp-Method` / `Mcp-Name` and whose servers check them. */
export const MIRROR_HEADERS_SINCE = '2026-07-28';

const REVISION = /^\d{4}-\d{2}-\d{2}$/;
/** SEP-2243: a value that is not plain ASCII travels as `=?base64?<standard base64 of its UTF-8>?=`. */
const BASE64_SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;
const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * The call the headers announce; throws a 400 for a request that cannot be decided from them: an older
 * or missing MCP-Protocol-Version, no Mcp-Method, a name-bearing method without Mcp-Name, a header sent
 * twice, or a value that does not decode.
 */
export function callFromHeaders(req: IncomingMessage): PolicyRequest {
  const version = single(req, 'mcp-protocol-version');
  if (version === undefined || !REVISION.test(version) || version < MIRROR_HEADERS_SINCE) {
    throw undecidable(
      `forward-auth decides per-tool policy from the Mcp-Method and Mcp-Name headers, which MCP ${MIRROR_HEADERS_SINCE} and later send: this request's MCP-Protocol-Version is ${version === undefined ? 'missing' : 'older'}`,
    );
  }
  const method = single(req, 'mcp-method');
  if (method === undefined || method === '' || !PRINTABLE.test(method)) throw undecidable('a POST needs the Mcp-Method header');
  const field = NAME_BEARING_METHODS.get(method);
  const rawName = single(req, 'mcp-name');
  if (field === undefined) {
    if (rawName !== undefined) throw undecidable('Mcp-Name was sent for a method that names no target');
    return { method };
  }
  if (rawName === undefined) throw undecidable(`${method} needs the Mcp-Name header`);
  return { method, name: mirroredValue(rawName) };
}

/**
 * A mirrored value as the upstream reads it: plain printable ASCII as it is (no percent-decoding: the
 * upstream compares the header with the body as written), the base64 form decoded as strict UTF-8.
 */
export function mirroredValue(value: string): string {
  const encoded = BASE64_SENTINEL.exec(value);
  if (encoded === null) {
    if (!PRINTABLE.test(value)) throw undecidable('Mcp-Name must be printable ASCII or the =?base64?...?= form');
    return value;
  }
  const bytes = Buffer.from(encoded[1]!, 'base64');
  // Buffer.from skips what is not base64; only a value that encodes back to itself is the one sent.
  if (bytes.toString('base64') !== encoded[1]) throw undecidable('Mcp-Name is not valid base64');
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw undecidable('Mcp-Name is not valid UTF-8');
  }
}

/** The header's value when it was sent once; a header sent twice is refused (two readers, two values). */
function single(req: IncomingMessage, lowerName: string): string | undefined {
  let value: string | undefined;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== lowerName) continue;
    if (value !== undefined) throw undecidable(`the ${lowerName} header was sent more than once`);
    value = raw[i + 1]!.trim();
  }
  return value;
}

function undecidable(description: string): HttpError {
  return new HttpError('invalid_request', description);
}
