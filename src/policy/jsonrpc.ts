// Reads a POST /mcp body as JSON-RPC 2.0 for policy decisions: one message or a batch, within bounds
// (size is bounded by the caller, nesting depth and batch length here). Anything that is not well-formed
// JSON-RPC is refused as a whole with a clear 400 before it reaches the upstream: a decision made on a
// message the upstream would read differently is no decision.

import { HttpError } from '../errors.ts';
import { NAME_BEARING_METHODS, type PolicyRequest } from './rules.ts';

export interface JsonRpcLimits {
  /** Deepest nesting of arrays and objects accepted (the JSON text is scanned before it is parsed). */
  maxDepth: number;
  /** Most messages in one batch. */
  maxBatch: number;
}

export const DEFAULT_JSONRPC_LIMITS: JsonRpcLimits = { maxDepth: 64, maxBatch: 100 };

/** A JSON-RPC message the client sent: a request or notification (with its method), or a response. */
export interface ClientMessage {
  /** undefined for a response to a server-initiated request. */
  call: PolicyRequest | undefined;
  id: string | number | null | undefined;
}

/** Parses `body` (UTF-8 JSON) into the messages it holds; throws a 400 HttpError on anything else. */
export function parseClientMessages(body: Buffer, limits: JsonRpcLimits = DEFAULT_JSONRPC_LIMITS): { messages: ClientMessage[]; batch: boolean } {
  checkDepth(body, limits.maxDepth);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new HttpError('invalid_request', 'the body is not JSON');
  }
  const batch = Array.isArray(parsed);
  const items = batch ? (parsed as unknown[]) : [parsed];
  if (items.length === 0) throw new HttpError('invalid_request', 'an empty JSON-RPC batch');
  if (items.length > limits.maxBatch) throw new HttpError('invalid_request', `a JSON-RPC batch may hold at most ${limits.maxBatch} messages`);
  const ids = new Set<string | number>();
  const messages = items.map((item) => {
    const message = readMessage(item);
    if (message.call !== undefined && message.id !== undefined && message.id !== null) {
      if (ids.has(message.id)) throw new HttpError('invalid_request', 'duplicate id in a JSON-RPC batch');
      ids.add(message.id);
    }
    return message;
  });
  return { messages, batch };
}

function readMessage(item: unknown): ClientMessage {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new HttpError('invalid_request', 'a JSON-RPC message must be an object');
  const m = item as Record<string, unknown>;
  if (m.jsonrpc !== '2.0') throw new HttpError('invalid_request', 'not JSON-RPC 2.0 (jsonrpc must be "2.0")');
  const id = m.id;
  if (id !== undefined && id !== null && typeof id !== 'string' && !(typeof id === 'number' && Number.isFinite(id))) {
    throw new HttpError('invalid_request', 'a JSON-RPC id must be a string or a number');
  }
  if (!('method' in m)) {
    if (!('result' in m) && !('error' in m)) throw new HttpError('invalid_request', 'a JSON-RPC message needs a method, a result or an error');
    return { call: undefined, id: id as ClientMessage['id'] };
  }
  if (typeof m.method !== 'string' || m.method.length === 0) throw new HttpError('invalid_request', 'a JSON-RPC method must be a non-empty string');
  const method = m.method;
  const field = NAME_BEARING_METHODS.get(method);
  if (field === undefined) return { call: { method }, id: id as ClientMessage['id'] };
  const params = m.params;
  const name = typeof params === 'object' && params !== null ? (params as Record<string, unknown>)[field] : undefined;
  if (typeof name !== 'string') throw new HttpError('invalid_request', `${method} needs params.${field} as a string`);
  return { call: { method, name }, id: id as ClientMessage['id'] };
}

/** Scans the JSON text for nesting deeper than `max`, skipping strings; cheap, and before any parse. */
function checkDepth(body: Buffer, max: number): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) throw new HttpError('invalid_request', `JSON nested deeper than ${max} levels`);
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
}

/**
 * The 2026-07-28 transport's `Mcp-Method` and `Mcp-Name` headers mirror the body so intermediaries can
 * route without parsing it. When present they must say what the body says (a mismatch is how a request
 * would be routed one way and executed another); `Mcp-Name` is compared for name-bearing methods only.
 */
export function checkMirrorHeaders(methodHeader: string | undefined, nameHeader: string | undefined, messages: readonly ClientMessage[]): void {
  if (methodHeader === undefined && nameHeader === undefined) return;
  const calls = messages.filter((m) => m.call !== undefined);
  if (calls.length !== 1 || messages.length !== 1) throw new HttpError('invalid_request', 'Mcp-Method and Mcp-Name go with a single JSON-RPC request, not a batch');
  const call = calls[0]!.call!;
  if (methodHeader !== undefined && methodHeader !== call.method) throw new HttpError('invalid_request', 'the Mcp-Method header does not match the body');
  if (nameHeader !== undefined) {
    if (call.name === undefined) throw new HttpError('invalid_request', 'Mcp-Name was sent for a method that names no target');
    if (nameHeader !== call.name && decodeMirrored(nameHeader) !== call.name) throw new HttpError('invalid_request', 'the Mcp-Name header does not match the body');
  }
}

/** Non-ASCII names travel percent-encoded in the header; a value that does not decode cannot match. */
function decodeMirrored(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}
