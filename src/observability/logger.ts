// Structured logs (pino). Secrets never reach a log line: the code logs no secret by construction, and
// these redaction paths are the net under it for anything that carries one by accident (a request's
// headers, an admin body with its callerToken, a form or JSON body with a token or a client secret).
//
// Output: JSON lines (one object a line, for log shippers), or, when stdout is a terminal
// (`logFormat: auto`, the default) or `LOG_FORMAT=pretty`, one short human-readable line an event.
// pino-pretty is not a dependency: the small formatter below reads pino's (already redacted) JSON.

import { pino, type Logger, type DestinationStream } from 'pino';

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

/** How much log output may wait in memory for a slow reader before lines are dropped. */
export const STDOUT_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/** Linux's PIPE_BUF: a write to a pipe of at most this many bytes is never interleaved with another's. */
export const ATOMIC_WRITE_BYTES = 4096;

/**
 * The most one write() to stdout carries when no other process shares it: four times sonic-boom's
 * default, so a busy proxy's access lines leave in a quarter of the writes (about 5 µs of CPU a
 * request less at 10,000 requests a second: docs/performance.md). LOG_FLUSH_INTERVAL_MS still bounds
 * how long a line waits.
 */
const STDOUT_WRITE_MAX_BYTES = 64 * 1024;

/** The longest a log line waits in memory before it is written, however quiet the process. */
export const LOG_FLUSH_INTERVAL_MS = 100;

/** This process's stdout destination for loggers (see batchedStdoutDestination). */
function stdoutDestination(shared: boolean): DestinationStream {
  if (batchedStdout?.shared !== shared) batchedStdout = { shared, destination: batchedStdoutDestination(shared) };
  return batchedStdout.destination;
}

/** This process's batching stdout destination, shared by every logger made for stdout with the same `shared`. */
let batchedStdout: { shared: boolean; destination: DestinationStream } | undefined;

/**
 * Writes `text` (whole lines, not JSON: `proxy listening on ...`) to stdout after every log line
 * logged before it. A direct write to fd 1 would overtake the lines still waiting in the batch.
 */
export function writeStdoutLines(text: string): void {
  if (batchedStdout === undefined) process.stdout.write(text);
  else batchedStdout.destination.write(text);
}

/**
 * stdout as pino writes it by default (sonic-boom, asynchronous: a request never waits for a log
 * write), with two differences.
 *
 * Lines are written in batches: once half a write's worth has gathered, or at the latest
 * LOG_FLUSH_INTERVAL_MS after a line was logged. Each asynchronous write is a hand-off to a libuv
 * thread and back: one per line (an access line per request) cost a busy proxy more than one context
 * switch and a tenth to a fifth of its CPU per request; one per batch costs a few a second.
 *
 * What waits for a slow or stuck reader (a full pipe) is bounded: past STDOUT_BUFFER_MAX_BYTES lines
 * are dropped rather than the process growing until it is OOM-killed. pino writes what is pending on
 * exit; only a hard kill loses lines, those of the last LOG_FLUSH_INTERVAL_MS at most.
 *
 * `shared`: several processes write to this stdout (worker processes inherit the primary's). Each
 * write() then carries whole lines and at most ATOMIC_WRITE_BYTES (sonic-boom cuts its buffer between
 * lines), so on a pipe, or a file opened for appending, no two processes' lines mix within a line.
 * Only a single line longer than that could (an access log line is a few hundred bytes).
 */
function batchedStdoutDestination(shared: boolean): DestinationStream {
  const maxWrite = shared ? ATOMIC_WRITE_BYTES : STDOUT_WRITE_MAX_BYTES;
  const stream = pino.destination({
    dest: 1,
    sync: false,
    maxLength: STDOUT_BUFFER_MAX_BYTES,
    maxWrite,
    minLength: maxWrite / 2,
    // Lines are handed over as bytes: sonic-boom then adds a line to its batch in constant time (with
    // strings it measures the whole batch's UTF-8 length again at every line).
    contentMode: 'buffer',
  });
  // sonic-boom's own type names only its string mode.
  const bufferSink = stream as unknown as { write(data: Buffer): boolean };
  // Bytes logged and not yet written (nor dropped): while any are, each tick asks for a write. One
  // asked for while another is under way is not queued by sonic-boom, so the next tick asks again.
  let unwritten = 0;
  stream.on('write', (bytes: number) => (unwritten -= bytes));
  stream.on('drop', (line: Buffer) => (unwritten -= line.length));
  setInterval(() => {
    if (unwritten > 0) stream.flush();
  }, LOG_FLUSH_INTERVAL_MS).unref();
  return {
    write(line: string) {
      const bytes = Buffer.from(line);
      unwritten += bytes.length;
      bufferSink.write(bytes);
    },
  };
}

/**
 * The logger for the one-line-per-request access log. Its fields are built by the proxy from known,
 * non-secret values (method, path without query, status, duration, auth kind, subject or clientId,
 * denial reason, upstream status), so the name-based redaction above has nothing to find there, and
 * it costs ~90 µs a line against ~6 µs without it (measured with 48 paths; see docs/performance.md).
 * Never log a request's headers or body through this logger.
 */
export function accessLogger(logger: Logger): Logger {
  return logger.child({}, { redact: { paths: [] } });
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
