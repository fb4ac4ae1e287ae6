// Reads a POST /mcp body as JSON-RPC 2.0 for policy decisions: one message or a batch, within bounds
// (size is bounded by the caller, nesting depth and batch length here). Anything that is not well-formed
// JSON-RPC is refused as a whole with a clear 400 before it reaches the upstream: a decision made on a
// message the upstream would read differently is no decision.
//
// So the body is read the one way every JSON parser agrees on, and what parsers disagree on is refused:
// a charset other than UTF-8 or a Content-Encoding (express's body parser decodes the declared charset,
// UTF-7 included), bytes that are not UTF-8 (Go substitutes U+FFFD, others refuse), lone surrogates
// (escaped `\ud800` too: Python keeps them, Go substitutes), a key twice in one object (first or last
// wins depending on the parser), two keys of one object equal under case folding and, on a message,
// a near spelling of a JSON-RPC member (Go's encoding/json matches struct fields case-insensitively,
// last wins), integers beyond 2^53 and non-finite numbers (read exactly by some, rounded by others).
// What is forwarded is the parsed value re-serialised: the bytes that were decided, in one form.

import { isUtf8 } from 'node:buffer';
import { HttpError } from '../http/errors.ts';
import { fold } from './arguments.ts';
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
  /** `tasks/get`, `tasks/result`, `tasks/cancel`: the task it names (`params.taskId`). */
  taskId?: string;
  /** A task-augmented request (`params.task` is an object): its answer is a CreateTaskResult. */
  createsTask?: true;
  /**
   * The client declares URL-mode elicitation: in an `initialize` (`params.capabilities.elicitation.url`,
   * MCP 2025-11-25), or on the request itself (the 2026-07-28 envelope,
   * `params._meta["io.modelcontextprotocol/clientCapabilities"].elicitation.url`).
   */
  urlElicitation?: true;
  /** A 2026-07-28 retry of a tools/call: the `params.requestState` it echoes (a string). */
  requestState?: string;
}

/** The MCP Tasks methods (2025-11-25) that name one task by `params.taskId`, decided by its owner. */
export const TASK_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/result', 'tasks/cancel']);

/** The messages of a body, and the body to forward: the parsed JSON re-serialised (UTF-8). */
export interface ClientBody {
  messages: ClientMessage[];
  batch: boolean;
  canonical: Buffer;
  /** The first request's `params._meta.traceparent` (where MCP carries trace context), when a string. */
  traceparent: string | undefined;
}

/**
 * Refuses what would make the body read differently upstream before it is read: a `Content-Type`
 * other than `application/json` with at most `charset=utf-8`, or any `Content-Encoding` but identity.
 * The forwarder then sends the canonical body as `application/json` without a coding.
 */
export function checkBodyHeaders(contentType: string | string[] | undefined, contentEncoding: string | string[] | undefined): void {
  if (contentEncoding !== undefined && (typeof contentEncoding !== 'string' || contentEncoding.trim().toLowerCase() !== 'identity')) {
    throw new HttpError('invalid_request', 'a POST /mcp body is decided by policy only without a Content-Encoding');
  }
  if (typeof contentType !== 'string')
    throw new HttpError('invalid_request', 'a POST /mcp body must be sent as Content-Type: application/json');
  // Split on every ';', quoted or not: a parameter hidden in a quoted string is seen here too (and refused).
  const [type, ...parameters] = contentType.split(';');
  if (type!.trim().toLowerCase() !== 'application/json')
    throw new HttpError('invalid_request', 'a POST /mcp body must be sent as Content-Type: application/json');
  for (const parameter of parameters) {
    const eq = parameter.indexOf('=');
    const name = (eq === -1 ? parameter : parameter.slice(0, eq)).trim().toLowerCase();
    if (name !== 'charset') continue;
    const value = parameter
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (eq === -1 || value !== 'utf-8')
      throw new HttpError('invalid_request', 'a POST /mcp body must be UTF-8: a charset other than utf-8 is refused');
  }
}

/** Parses `body` (UTF-8 JSON) into the messages it holds; throws a 400 HttpError on anything else. */
export function parseClientMessages(body: Buffer, limits: JsonRpcLimits = DEFAULT_JSONRPC_LIMITS): ClientBody {
  if (!isUtf8(body)) throw new HttpError('invalid_request', 'the body is not valid UTF-8');
  const members = scan(body, limits.maxDepth);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new HttpError('invalid_request', 'the body is not JSON');
  }
  // JSON.parse keeps the last of two equal keys: fewer members than the text holds means a repeated key.
  if (checkValue(parsed) !== members) throw new HttpError('invalid_request', 'a JSON object holds the same key twice');
  const batch = Array.isArray(parsed);
  const items = batch ? (parsed as unknown[]) : [parsed];
  if (items.length === 0) throw new HttpError('invalid_request', 'an empty JSON-RPC batch');
  if (items.length > limits.maxBatch)
    throw new HttpError('invalid_request', `a JSON-RPC batch may hold at most ${limits.maxBatch} messages`);
  const ids = new Set<string | number>();
  const messages = items.map((item) => {
    const message = readMessage(item);
    if (message.call !== undefined && message.id !== undefined && message.id !== null) {
      if (ids.has(message.id)) throw new HttpError('invalid_request', 'duplicate id in a JSON-RPC batch');
      ids.add(message.id);
    }
    return message;
  });
  return { messages, batch, canonical: Buffer.from(JSON.stringify(parsed)), traceparent: traceparentIn(items) };
}

function traceparentIn(items: readonly unknown[]): string | undefined {
  const first = items.find((item) => typeof (item as { method?: unknown } | null)?.method === 'string');
  const meta = (first as { params?: { _meta?: { traceparent?: unknown } } } | undefined)?.params?._meta;
  return typeof meta === 'object' && meta !== null && typeof meta.traceparent === 'string' ? meta.traceparent : undefined;
}

/**
 * Walks a parsed value: refuses lone surrogates, two keys of one object equal under case folding and
 * numbers that parsers read differently; returns how many object members it holds.
 */
function checkValue(value: unknown): number {
  if (typeof value === 'string') {
    if (!isWellFormed(value)) throw new HttpError('invalid_request', 'a JSON string holds a lone surrogate (not Unicode text)');
    return 0;
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value))) {
      throw new HttpError('invalid_request', 'a JSON number beyond 2^53 is read differently by different parsers');
    }
    return 0;
  }
  if (typeof value !== 'object' || value === null) return 0;
  let members = 0;
  if (Array.isArray(value)) {
    for (const item of value) members += checkValue(item);
    return members;
  }
  const keys = Object.keys(value);
  const folded = keys.length > 1 ? new Set<string>() : undefined;
  for (const key of keys) {
    if (!isWellFormed(key)) throw new HttpError('invalid_request', 'a JSON key holds a lone surrogate (not Unicode text)');
    if (folded !== undefined) {
      const f = fold(key);
      if (folded.has(f))
        throw new HttpError(
          'invalid_request',
          'two keys of a JSON object differ only in case (parsers that match keys case-insensitively read them as one)',
        );
      folded.add(f);
    }
    members += 1 + checkValue((value as Record<string, unknown>)[key]);
  }
  return members;
}

function isWellFormed(text: string): boolean {
  return (text as unknown as { isWellFormed(): boolean }).isWellFormed();
}

/** The members of a JSON-RPC message: a key spelt like one of these, but not exactly, is refused. */
const MESSAGE_MEMBERS = new Map(['jsonrpc', 'id', 'method', 'params', 'result', 'error'].map((m) => [fold(m), m]));

function readMessage(item: unknown): ClientMessage {
  if (typeof item !== 'object' || item === null || Array.isArray(item))
    throw new HttpError('invalid_request', 'a JSON-RPC message must be an object');
  const m = item as Record<string, unknown>;
  for (const key of Object.keys(m)) {
    const member = MESSAGE_MEMBERS.get(fold(key));
    if (member !== undefined && member !== key)
      throw new HttpError('invalid_request', `a JSON-RPC message member spelt other than "${member}"`);
  }
  if (m.jsonrpc !== '2.0') throw new HttpError('invalid_request', 'not JSON-RPC 2.0 (jsonrpc must be "2.0")');
  const id = m.id;
  if (id !== undefined && id !== null && typeof id !== 'string' && !(typeof id === 'number' && Number.isFinite(id))) {
    throw new HttpError('invalid_request', 'a JSON-RPC id must be a string or a number');
  }
  if (!('method' in m)) {
    if (!('result' in m) && !('error' in m))
      throw new HttpError('invalid_request', 'a JSON-RPC message needs a method, a result or an error');
    return { call: undefined, id: id as ClientMessage['id'] };
  }
  if (typeof m.method !== 'string' || m.method.length === 0)
    throw new HttpError('invalid_request', 'a JSON-RPC method must be a non-empty string');
  const method = m.method;
  const message = taskFields(method, m.params, { call: { method }, id: id as ClientMessage['id'] });
  if (declaresUrlElicitation(method, m.params)) message.urlElicitation = true;
  const field = NAME_BEARING_METHODS.get(method);
  if (field === undefined) return message;
  const params = m.params;
  const name = typeof params === 'object' && params !== null ? (params as Record<string, unknown>)[field] : undefined;
  if (typeof name !== 'string') throw new HttpError('invalid_request', `${method} needs params.${field} as a string`);
  // A tools/call's arguments, as parsed: what argument conditions read (taskFields refused a near spelling).
  const args = method === 'tools/call' ? (params as Record<string, unknown>).arguments : undefined;
  message.call = args === undefined ? { method, name } : { method, name, arguments: args };
  const requestState = method === 'tools/call' ? (params as Record<string, unknown>).requestState : undefined;
  if (typeof requestState === 'string') message.requestState = requestState;
  return message;
}

/** Where a request of the 2026-07-28 protocol carries its client's capabilities. */
const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';

/** The client's capabilities hold `elicitation.url` (an object): it can send its user to a URL the server names. */
function declaresUrlElicitation(method: string, params: unknown): boolean {
  const capabilities =
    method === 'initialize' ? member(params, 'capabilities') : member(member(params, '_meta'), CLIENT_CAPABILITIES_META_KEY);
  const url = member(member(capabilities, 'elicitation'), 'url');
  return typeof url === 'object' && url !== null && !Array.isArray(url);
}

function member(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[key] : undefined;
}

/**
 * What a message says about tasks: the one it names (a string, or it is refused), or that it creates
 * one. Keys are matched as a case-insensitive parser matches them (`TaskId` is `taskId` to Go's
 * encoding/json); two keys equal under folding never get here (checkValue).
 */
function taskFields(method: string, params: unknown, message: ClientMessage): ClientMessage {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    if (TASK_METHODS.has(method)) throw new HttpError('invalid_request', `${method} needs params.taskId as a string`);
    return message;
  }
  let taskId: unknown;
  let task: unknown;
  for (const [key, value] of Object.entries(params)) {
    const folded = fold(key);
    if (folded === 'taskid') taskId = value;
    else if (folded === 'task') task = value;
    // Go's encoding/json reads `Arguments` as a tools/call's `arguments`, the TypeScript and Python SDKs do not.
    else if (folded === 'arguments' && key !== 'arguments' && method === 'tools/call')
      throw new HttpError('invalid_request', 'tools/call params.arguments spelt in another case');
  }
  if (TASK_METHODS.has(method)) {
    if (typeof taskId !== 'string') throw new HttpError('invalid_request', `${method} needs params.taskId as a string`);
    message.taskId = taskId;
  }
  if (typeof task === 'object' && task !== null) message.createsTask = true;
  return message;
}

/**
 * Scans the JSON text for nesting deeper than `max`, skipping strings; cheap, and before any parse.
 * Returns how many object members the text holds (one ':' outside strings each, once it parses).
 */
function scan(body: Buffer, max: number): number {
  let depth = 0;
  let members = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) throw new HttpError('invalid_request', `JSON nested deeper than ${max} levels`);
    } else if (c === 0x7d || c === 0x5d) depth--;
    else if (c === 0x3a) members++;
  }
  return members;
}

/**
 * The 2026-07-28 transport's `Mcp-Method` and `Mcp-Name` headers mirror the body so intermediaries can
 * route without parsing it. When present they must say what the body says (a mismatch is how a request
 * would be routed one way and executed another); `Mcp-Name` is compared for name-bearing methods only.
 */
export function checkMirrorHeaders(
  methodHeader: string | undefined,
  nameHeader: string | undefined,
  messages: readonly ClientMessage[],
): void {
  if (methodHeader === undefined && nameHeader === undefined) return;
  const calls = messages.filter((m) => m.call !== undefined);
  if (calls.length !== 1 || messages.length !== 1)
    throw new HttpError('invalid_request', 'Mcp-Method and Mcp-Name go with a single JSON-RPC request, not a batch');
  const call = calls[0]!.call!;
  if (methodHeader !== undefined && methodHeader !== call.method)
    throw new HttpError('invalid_request', 'the Mcp-Method header does not match the body');
  if (nameHeader !== undefined) {
    if (call.name === undefined) throw new HttpError('invalid_request', 'Mcp-Name was sent for a method that names no target');
    if (nameHeader !== call.name && decodeMirrored(nameHeader) !== call.name)
      throw new HttpError('invalid_request', 'the Mcp-Name header does not match the body');
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
