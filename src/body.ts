// Bounded request-body readers for the small JSON and form bodies of the admin and OAuth endpoints.
// (/mcp bodies are never read here: they stream through to the upstream.)

import type { IncomingMessage } from 'node:http';
import { HttpError } from './errors.ts';

/** Reads at most `max` bytes; a larger body is refused with 413 without reading the rest. */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const tooLarge = () => new HttpError(413, 'payload_too_large', `request bodies are limited to ${max} bytes`);
  if (Number(req.headers['content-length'] ?? NaN) > max) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  if (raw.length === 0) return {};
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new HttpError(400, 'invalid_request', 'the body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HttpError(400, 'invalid_request', 'the body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/**
 * An `application/x-www-form-urlencoded` body (RFC 6749 §3.2): a parameter sent twice is an error,
 * and an empty value counts as absent.
 */
export function parseForm(req: IncomingMessage, raw: Buffer): Map<string, string> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new HttpError(400, 'invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  const form = new Map<string, string>();
  for (const [key, value] of new URLSearchParams(raw.toString('utf8'))) {
    if (form.has(key)) throw new HttpError(400, 'invalid_request', `parameter ${key} is repeated`);
    if (value !== '') form.set(key, value);
  }
  return form;
}
