// Access lines whose bytes must be what pino writes for the same fields: every kind of value the
// access log carries, absent fields, and strings pino escapes (quotes, backslashes, control
// characters) or leaves as they are (non-ASCII). Shared by test/support/log-child.ts (which writes
// them to its stdout) and test/integration/log-output.test.ts (which logs them through pino).

import { NO_ACCESS_FIELDS, type AccessFields } from '../../src/observability/logger.ts';

/** The time both sides see (Date.now), so their lines can be compared byte for byte. */
export const PINNED_NOW = Date.UTC(2026, 11, 6, 14, 30, 15, 123);

const forwarded: AccessFields = {
  ...NO_ACCESS_FIELDS,
  method: 'POST',
  path: '/mcp',
  status: 200,
  durationMs: 0.412,
  authKind: 'oauth',
  subject: 'client-3f9a',
  clientId: 'client-3f9a',
  outcome: 'forwarded',
  upstreamStatus: 200,
};

export const ACCESS_CASES: AccessFields[] = [
  forwarded,
  {
    ...NO_ACCESS_FIELDS,
    method: 'POST',
    path: '/mcp',
    status: 401,
    durationMs: 0.05,
    outcome: 'denied',
    reason: 'unknown',
    denial: 'unknown',
  },
  { ...forwarded, dpopRefusal: 'replayed', upstreamStatus: 'error', aborted: true, endedBy: 'revoked', status: 502 },
  // Nothing but the path: every other field left out.
  { ...NO_ACCESS_FIELDS, path: '/' },
  { ...NO_ACCESS_FIELDS },
  // Escaped by pino: quotes and backslashes; control characters (through JSON.stringify).
  { ...forwarded, subject: 'say "hi" \\ bye\\', path: '/mcp/"x"' },
  { ...forwarded, subject: 'tab\there\nnew line\u0001\u001f', clientId: 'cr\r' },
  // Left as they are, written as UTF-8: non-ASCII, DEL and C1 controls.
  { ...forwarded, subject: 'José', clientId: 'Zoë Ångström 日本 🙂' },
  { ...forwarded, subject: '\u007f\u0085', authKind: 'user' },
  // Lone surrogates: as is in a short string (U+FFFD in UTF-8), escaped in a long one (JSON.stringify).
  { ...forwarded, subject: 'x\ud800y', clientId: `${'a'.repeat(120)}\udc00` },
  // Over 100 characters: JSON.stringify, with and without something to escape.
  { ...forwarded, path: `/${'p'.repeat(150)}"q"`, subject: 'é'.repeat(101) },
  { ...forwarded, subject: '' },
  // Numbers as pino writes them, a non-finite one as null; booleans.
  { ...forwarded, durationMs: 123456.789, status: Number.NaN, upstreamStatus: Number.POSITIVE_INFINITY, aborted: false },
  { ...forwarded, durationMs: 0, status: 0 },
  { ...forwarded, durationMs: 1e-7 },
  // Longer than the stage could hold at its worst (six bytes a character): logged through pino.
  { ...forwarded, path: `/${'long/'.repeat(2400)}` },
];
