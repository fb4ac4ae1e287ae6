// The access line (one a proxy request), written without a string or a buffer of its own: its
// fields are serialised straight into the stdout stage (stdout.ts), byte for byte the line pino
// writes for them (`{"level":30,"time":"<ISO>",<the logger's bindings>,<fields>,"msg":"request"}`),
// escaping included. Allocating and concatenating a line's text, and handing each line over on its
// own, was most of what an access line cost; pino's own logic was a small part (docs/performance.md).

import { pino, type Logger } from 'pino';
import { StdoutStage } from './stdout.ts';

/** The access line's fields, in the order they are written. */
export const ACCESS_FIELDS = [
  'method',
  'path',
  'status',
  'durationMs',
  'authKind',
  'subject',
  'clientId',
  'outcome',
  'reason',
  'denial',
  'dpopRefusal',
  'upstreamStatus',
  'aborted',
  'endedBy',
] as const;

/** One access line: every field named, an undefined one left out of the line. */
export type AccessFields = { [K in (typeof ACCESS_FIELDS)[number]]: string | number | boolean | undefined };

/** A line with no field set, for one that knows only a few (spread it, then set those). */
export const NO_ACCESS_FIELDS: Readonly<AccessFields> = Object.freeze(
  Object.fromEntries(ACCESS_FIELDS.map((name) => [name, undefined])) as AccessFields,
);

const KEYS = ACCESS_FIELDS.map((name) => `,"${name}":`);
const LINE_START = '{"level":30,"time":"';
const LINE_END = ',"msg":"request"}\n';
/** The most bytes a line takes besides its bindings and its string values. */
const FIXED_BOUND =
  LINE_START.length + '2026-01-01T00:00:00.000Z"'.length + KEYS.join('').length + ACCESS_FIELDS.length * 24 + LINE_END.length;
const QUOTE = 0x22;

/**
 * Writes the proxy's access lines: into the stdout stage when the logger writes its JSON lines there
 * (and the level lets `info` through), else through the logger (`info`), as any other line.
 * `logger`: the access logger (see accessLogger), a logger made by createLogger or a child of one.
 */
export class AccessLog {
  readonly #logger: Logger;
  readonly #stage: StdoutStage | undefined;
  /** The logger's bindings as pino writes them (`,"service":"mcp-bearer-proxy"`, a worker's id). */
  readonly #bindings: string;
  readonly #fixedBound: number;

  constructor(logger: Logger) {
    this.#logger = logger;
    const own = logger as unknown as Record<symbol, unknown>;
    const stream = own[pino.symbols.streamSym];
    this.#stage = stream instanceof StdoutStage ? stream : undefined;
    this.#bindings = String(own[pino.symbols.chindingsSym] ?? '');
    this.#fixedBound = FIXED_BOUND + Buffer.byteLength(this.#bindings);
  }

  /** Whether an access line is written at all (the level lets `info` through). */
  get enabled(): boolean {
    return this.#logger.isLevelEnabled('info');
  }

  write(fields: AccessFields): void {
    if (!this.enabled) return;
    if (this.#stage === undefined || !this.#stageLine(this.#stage, fields)) this.#logger.info(fields, 'request');
  }

  /** The line into the stage; false when it cannot hold a line that long (it is then logged as usual). */
  #stageLine(stage: StdoutStage, fields: AccessFields): boolean {
    let bound = this.#fixedBound;
    for (const name of ACCESS_FIELDS) {
      const value = fields[name];
      // A UTF-16 unit is at most 3 bytes in UTF-8, at most 6 escaped (\u001f).
      if (typeof value === 'string') bound += value.length * 6 + 2;
    }
    if (!stage.room(bound)) return false;
    const bytes = stage.bytes;
    let at = stage.used;
    at += bytes.write(LINE_START, at);
    at += bytes.write(isoNow(), at);
    bytes[at++] = QUOTE;
    at += bytes.write(this.#bindings, at);
    for (let i = 0; i < ACCESS_FIELDS.length; i++) {
      const value = fields[ACCESS_FIELDS[i]!];
      if (value === undefined) continue;
      at += bytes.write(KEYS[i]!, at);
      at = writeValue(bytes, at, value);
    }
    at += bytes.write(LINE_END, at);
    stage.staged(at);
    return true;
  }
}

/** `value` as pino writes it at `at`; returns where it ends. */
function writeValue(bytes: Buffer, at: number, value: string | number | boolean): number {
  if (typeof value === 'string') {
    if (value.length > 100 || needsEscape(value)) return at + bytes.write(pinoString(value), at);
    bytes[at++] = QUOTE;
    at += bytes.write(value, at);
    bytes[at++] = QUOTE;
    return at;
  }
  if (typeof value === 'number') return at + bytes.write(Number.isFinite(value) ? String(value) : 'null', at);
  return at + bytes.write(value ? 'true' : 'false', at);
}

function needsEscape(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    // A surrogate too: pino writes a lone one as is or escaped (pinoString), depending on the string.
    if (code < 32 || code === 0x22 || code === 0x5c || (code >= 0xd800 && code <= 0xdfff)) return true;
  }
  return false;
}

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);

/**
 * A string value as pino (10) writes it: JSON.stringify from Node 25 on; before, over 100 characters
 * or with a control character, JSON.stringify, else the string with `"` and `\` escaped (a lone
 * surrogate is then left as is, and becomes U+FFFD in UTF-8, where JSON.stringify would escape it).
 */
function pinoString(value: string): string {
  if (NODE_MAJOR >= 25 || value.length > 100) return JSON.stringify(value);
  let out = '';
  let last = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 32) return JSON.stringify(value);
    if (code === 0x22 || code === 0x5c) {
      out += `${value.slice(last, i)}\\`;
      last = i;
    }
  }
  return `"${out}${value.slice(last)}"`;
}

let isoMs = -1;
let isoText = '';

/** The time as pino's isoTime writes it, made once a millisecond. */
function isoNow(): string {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    isoText = new Date(now).toISOString();
  }
  return isoText;
}
