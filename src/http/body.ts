// Bounded request-body readers for the small JSON and form bodies of the admin and OAuth endpoints.
// (/mcp bodies are read here only within a bound: a policy's, or to find the tasks they name.)

import type { IncomingMessage } from 'node:http';
import { HttpError, payloadTooLarge } from './errors.ts';

/** Reads at most `max` bytes; a larger body is refused with 413 without reading the rest. */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  if (Number(req.headers['content-length'] ?? NaN) > max) return Promise.reject(payloadTooLarge(max));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.pause();
        reject(payloadTooLarge(max));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    // The client went (or was cut by the request timeout) before its body was whole: a request that
    // cannot be answered, not a fault of this server.
    req.on('error', (err) => reject(new HttpError('invalid_request', 'the request body ended before it was complete', { cause: err })));
  });
}

export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  if (raw.length === 0) return {};
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new HttpError('invalid_request', 'the body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HttpError('invalid_request', 'the body must be a JSON object');
  }
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) {
    throw new HttpError('invalid_request', `the body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return value as Record<string, unknown>;
}

/**
 * How deep a JSON body may nest. JSON.parse takes any depth, but what later writes the value back
 * (JSON.stringify, a recursive walk) overflows the stack near ten thousand levels, which a 64 KiB
 * body reaches: refused here, with a clear error, instead of failing as a bug further on.
 */
export const MAX_JSON_DEPTH = 32;

/** Whether a parsed JSON value has objects or arrays nested more than `limit` deep (walked without recursion). */
function nestedDeeperThan(root: object, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (depth > limit) return true;
    for (const child of Object.values(value as object)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}

/**
 * A parsed `application/x-www-form-urlencoded` body (RFC 6749 §3.2). `get` treats an empty value as
 * absent (RFC 6749 §3.1); `has` still tells that the parameter was sent, for the rare place where an
 * empty value must be told apart from a missing one.
 */
export class Form {
  readonly #values = new Map<string, string>();
  readonly #sent = new Set<string>();

  get(name: string): string | undefined {
    return this.#values.get(name);
  }

  has(name: string): boolean {
    return this.#sent.has(name);
  }

  static of(entries: Iterable<[string, string]>): Form {
    const form = new Form();
    for (const [key, value] of entries) {
      if (form.#sent.has(key)) throw new HttpError('invalid_request', `parameter ${key.slice(0, 64)} is repeated`);
      form.#sent.add(key);
      if (value !== '') form.#values.set(key, value);
    }
    return form;
  }
}

/** Parses a form body; a parameter sent twice is an error. */
export function parseForm(req: IncomingMessage, raw: Buffer): Form {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new HttpError('invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  return Form.of(new URLSearchParams(raw.toString('utf8')));
}
