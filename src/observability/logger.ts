// Structured logs (pino). Secrets never reach a log line: the code logs no secret by construction, and
// these redaction paths are the net under it for anything that carries one by accident (a request's
// headers, an admin body with its callerToken, a form or JSON body with a token or a client secret).
//
// Output: JSON lines (one object a line, for log shippers), or, when stdout is a terminal
// (`logFormat: auto`, the default) or `LOG_FORMAT=pretty`, one short human-readable line an event.
// pino-pretty is not a dependency: the small formatter below reads pino's (already redacted) JSON.
// JSON lines for stdout go through one staging buffer (stdout.ts) and leave in batches; the access
// line, one a request, is serialised straight into it (access-line.ts) instead of through pino.

import { pino, type Logger, type DestinationStream } from 'pino';
import { AccessLog } from './access-line.ts';
import { stdoutDestination } from './stdout.ts';

export { ATOMIC_WRITE_BYTES, LOG_FLUSH_INTERVAL_MS, STDOUT_BUFFER_MAX_BYTES, writeStdoutLines } from './stdout.ts';
export { NO_ACCESS_FIELDS } from './access-line.ts';
export type { AccessFields, AccessLog } from './access-line.ts';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** `auto`: human-readable lines when stdout is a terminal, JSON lines otherwise. */
export type LogFormat = (typeof LOG_FORMATS)[number];

export type { Logger };

/** Field names whose value is a secret wherever they appear (top level, or one or two levels down). */
const SECRET_FIELDS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'callerToken',
  'masterToken',
  'clientSecret',
  'client_secret',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'token',
  'subject_token',
  'actor_token',
  'id_token',
  'password',
];

export const REDACT_PATHS = SECRET_FIELDS.flatMap((f) => {
  const key = /^[A-Za-z_$][\w$]*$/.test(f) ? `.${f}` : `["${f}"]`;
  return [key.replace(/^\./, ''), `*${key}`, `*.*${key}`];
});

const CENSOR = '[redacted]';

/**
 * `format`: `json` always; `pretty` always; `auto` pretty only when writing to a terminal stdout
 * (an explicit `destination` is never a terminal, so it gets JSON unless `pretty` is asked for).
 * `sharedStdout`: other processes (worker processes) write to the same stdout, see stdoutDestination.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream, format: LogFormat = 'auto', sharedStdout = false): Logger {
  const options = {
    level,
    base: { service: 'mcp-bearer-proxy' },
    redact: { paths: REDACT_PATHS, censor: CENSOR },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  const pretty = format === 'pretty' || (format === 'auto' && destination === undefined && process.stdout.isTTY === true);
  if (pretty) {
    const out = destination ?? process.stdout;
    return pino(options, prettyDestination(out, destination === undefined && process.stdout.isTTY === true));
  }
  return pino(options, destination ?? stdoutDestination(sharedStdout));
}

/**
 * The one-line-per-request access log, without redaction. Its fields are built by the proxy from
 * known, non-secret values (method, path without query, status, duration, auth kind, subject or
 * clientId, denial reason, upstream status), so the name-based redaction above has nothing to find
 * there, and it costs ~90 µs a line against ~6 µs without it (measured with 48 paths; see
 * docs/performance.md). When `logger` writes JSON lines to stdout, a line is serialised straight into
 * the stdout stage, the same bytes pino would write (access-line.ts); otherwise (pretty lines, a
 * destination of the caller's) it is logged through a child of `logger` made without redaction.
 * Never put a request's headers or body in an access line.
 */
export function accessLogger(logger: Logger): AccessLog {
  return new AccessLog(logger.child({}, { redact: { paths: [] } }));
}

/**
 * An error as a log field: its message, its code when it has one (ECONNREFUSED, ...) and, for a bug,
 * its stack. Never the error's own properties or cause chain: those may hold request data.
 */
export function describe(err: unknown, withStack = false): { message: string; code?: string; stack?: string } {
  if (!(err instanceof Error)) return { message: String(err) };
  const out: { message: string; code?: string; stack?: string } = { message: err.message };
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string') out.code = code;
  if (withStack && err.stack !== undefined) out.stack = err.stack;
  return out;
}

const LEVELS: Record<number, [name: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '90'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};
const HIDDEN = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service']);

/** A pino destination that turns each JSON line into `HH:MM:SS.mmm LEVEL message key=value ...`. */
export function prettyDestination(out: { write(text: string): unknown }, color = false): DestinationStream {
  return {
    write(line: string) {
      out.write(formatPrettyLine(line, color));
    },
  };
}

/** One pino JSON line as one human-readable line (the input is returned as is when it is not JSON). */
export function formatPrettyLine(line: string, color = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const [name, code] = LEVELS[entry.level as number] ?? [String(entry.level).padEnd(5), '0'];
  const time = typeof entry.time === 'string' ? entry.time.slice(11, 23) : new Date(Number(entry.time)).toISOString().slice(11, 23);
  const paint = (c: string, text: string) => (color ? `\x1b[${c}m${text}\x1b[0m` : text);
  const fields: string[] = [];
  for (const [key, value] of Object.entries(entry)) {
    if (HIDDEN.has(key) || value === undefined) continue;
    if (key === 'err' && value !== null && typeof value === 'object') {
      const err = value as { message?: unknown; code?: unknown };
      fields.push(
        `${paint('2', 'err=')}${formatValue(String(err.message ?? ''))}${err.code !== undefined ? ` ${paint('2', 'code=')}${formatValue(err.code)}` : ''}`,
      );
      continue;
    }
    fields.push(`${paint('2', `${key}=`)}${formatValue(value)}`);
  }
  const msg = typeof entry.msg === 'string' ? entry.msg : '';
  return `${paint('90', time)} ${paint(code, name)} ${msg}${fields.length > 0 ? ` ${fields.join(' ')}` : ''}\n`;
}

function formatValue(value: unknown): string {
  if (typeof value === 'string') return /^[\w.:/@+-]+$/.test(value) ? value : JSON.stringify(value);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}:${formatValue(v)}`)
      .join(',')
      .replace(/^/, '{')
      .concat('}');
  }
  return JSON.stringify(value);
}
