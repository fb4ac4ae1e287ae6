// What several groups of keys share: the checks of one value, and the lists and defaults they name.

import { isTokenShaped, weakTokenReason } from '../../model/credentials.ts';
import { integer, type Problems } from '../spec.ts';
import { DEFAULT_PROFILES } from '../../model/profiles.ts';

export const CREDENTIAL_MODES = ['none', 'idp', 'token-exchange', 'oauth'] as const;
export type CredentialMode = (typeof CREDENTIAL_MODES)[number];
export const DEFAULT_IDP_ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** The most proxy worker processes: the bound of `proxy.workers`, and of `0` (one per CPU) on a large machine. */
export const MAX_WORKERS = 64;
export const GENERATE_HINT = 'generate one with `node bin/mcp-bearer-proxy.js token generate` or `openssl rand -hex 32`';

/** The token lifetimes of one built-in client profile, defaulting to its built-in definition. */
export function profileLifetimes(name: string, clients: string) {
  const builtIn = DEFAULT_PROFILES.find((p) => p.name === name)!;
  return {
    accessTokenLifetimeSeconds: integer({
      tier: 'tuning',
      default: builtIn.accessTokenLifetimeSeconds,
      min: 60,
      max: 7 * 24 * 3600,
      description: `Access tokens from \`/token\` for clients of the \`${name}\` profile (${clients}). Keep it well above a minute: mcp-remote refreshes when less than 60 s remain.`,
    }),
    refreshTokenLifetimeSeconds: integer({
      tier: 'tuning',
      default: builtIn.refreshTokenLifetimeSeconds,
      min: 0,
      max: 365 * 24 * 3600,
      description: `Refresh tokens for clients of the \`${name}\` profile, renewed at each rotation (\`0\`: none).`,
    }),
  };
}
export function checkMasterToken(token: string, label: string, problems: Problems): void {
  // Named by its variable wherever it was written: the file only ever refers to it (${BEARER_SECRET_MASTER}).
  const name = label === 'masterToken' ? 'BEARER_SECRET_MASTER' : label;
  if (token === '') {
    problems.push(`${name} is not set: ${GENERATE_HINT} and export it`);
  } else if (!isTokenShaped(token)) {
    problems.push(
      `${name} must be exactly 64 lowercase hex characters (32 random bytes); the value given has ${token.length} characters${/[A-F]/.test(token) ? ' and uppercase letters' : ''}; ${GENERATE_HINT}`,
    );
  } else {
    const weak = weakTokenReason(token);
    if (weak !== undefined) {
      problems.push(
        `${name} is not a random secret: ${weak}. A placeholder would let anyone who guesses it administer every token; ${GENERATE_HINT}`,
      );
    }
  }
}

export function parseHttpUrl(name: string, value: string, problems: Problems): URL | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${name} "${value}" is not a valid URL (example: http://127.0.0.1:3000/mcp)`);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`${name} must be an http:// or https:// URL (got ${url.protocol})`);
    return undefined;
  }
  if (url.username || url.password) problems.push(`${name} must not carry credentials`);
  return url;
}

export function checkHttpUrl(name: string, value: string, problems: Problems, requirePath = false): void {
  const url = parseHttpUrl(name, value, problems);
  if (url !== undefined && requirePath && (url.pathname === '' || url.pathname === '/')) {
    problems.push(`${name} must name the MCP endpoint path, e.g. http://127.0.0.1:3000/mcp`);
  }
}

/** The base URL only: metadata and challenges append `/mcp` and `/.well-known/...` to it. */
export function checkPublicUrl(name: string, value: string, problems: Problems): void {
  const url = parseHttpUrl(name, value, problems);
  if (url === undefined) return;
  if (url.search !== '' || url.hash !== '' || /[?#]/.test(value)) {
    problems.push(`${name} must be a base URL without a query or fragment (got "${value}")`);
  } else if (/\/mcp$/i.test(url.pathname)) {
    problems.push(
      `${name} is the base URL, without /mcp (the sidecar adds it; "${value}" would advertise ${value}/mcp): use ${url.origin}${url.pathname.slice(0, -4)}`,
    );
  }
}

/** The length of an upstream credential key (AES-256). */
export const CREDENTIAL_KEY_BYTES = 32;

/**
 * 32 key bytes from their configured text: 64 hex characters, or base64 (standard or url-safe, padded
 * or not) of exactly 32 bytes. Answers a reason when the text is neither (never echoing the text).
 */
export function parseCredentialKey(text: string): Buffer | string {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) {
    const bytes = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (bytes.length === CREDENTIAL_KEY_BYTES) return bytes;
    return `it decodes as base64 to ${bytes.length} bytes, not 32`;
  }
  return 'it is neither 64 hex characters nor base64 of 32 bytes';
}

/** A credential key: 32 bytes as 64 hex characters or base64 (the problem never repeats the value). */
export function checkCredentialKey(key: string, label: string, problems: Problems): void {
  const parsed = parseCredentialKey(key);
  if (typeof parsed === 'string')
    problems.push(
      `${label} must be 32 random bytes as 64 hex characters or base64: ${parsed} (generate one with \`openssl rand -hex 32\`)`,
    );
}

/**
 * Headers the credential may not go in: those the proxy itself owns (framing, routing, the MCP
 * session, the identity headers it adds), where a credential would break or spoof the request.
 */
export const RESERVED_CREDENTIAL_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-authorization',
  'cookie',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'content-type',
  'accept',
  'forwarded',
  'traceparent',
  'tracestate',
]);

export function checkCredentialHeader(name: string, label: string, problems: Problems): void {
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) problems.push(`${label} "${name}" is not a valid header name`);
  else if (RESERVED_CREDENTIAL_HEADERS.has(name) || name.startsWith('x-mcp-auth-') || name.startsWith('x-forwarded-')) {
    problems.push(
      `${label} "${name}" is a header the proxy sets or forwards itself: name another one (authorization, or e.g. x-api-token)`,
    );
  }
}
