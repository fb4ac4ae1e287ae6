// Whether a JSON-RPC body may name an MCP task, decided from its bytes without parsing it: what lets
// the sidecar, without a policy, parse only the bodies that may create or name a task. A JSON string
// (key or value) that reads "task..." is written either with those letters as they are (`"task`) or
// with a `\uXXXX` escape among them (the only escape that can spell a letter), so a body holding
// neither names no task, whatever a parser makes of it. Letters are matched as Go's encoding/json
// matches a key to a field: in any case, and `ſ` (U+017F) as `s`, `K` (U+212A, Kelvin) as `k`.

/** `"task` in any case, `s` and `k` also as the UTF-8 of U+017F and U+212A (bytes read as latin1). */
const MENTION_AT_START = /^"[tT][aA](?:[sS]|\xc5\xbf)(?:[kK]|\xe2\x84\xaa)/;
/** The same at the end of the scanner's decoded tail (ASCII letters lowercased). */
const MENTION_AT_END = /"ta(?:s|\xc5\xbf)(?:k|\xe2\x84\xaa)$/;
const TAIL_LENGTH = 8;
const UNICODE_ESCAPE = Buffer.from('\\u');
const QUOTED_T = [Buffer.from('"t'), Buffer.from('"T')];

/** False only when no JSON string of `body` can begin with "task" as a case-folding parser reads it (nor hold a `\u` escape). */
export function mayNameTasks(body: Buffer): boolean {
  // Native searches: a body is looked at only where a string starts with t or T.
  if (body.includes(UNICODE_ESCAPE)) return true;
  for (const prefix of QUOTED_T) {
    for (let at = body.indexOf(prefix); at !== -1; at = body.indexOf(prefix, at + 1)) {
      if (MENTION_AT_START.test(body.toString('latin1', at, at + TAIL_LENGTH))) return true;
    }
  }
  return false;
}

const HEX4 = /^[0-9a-fA-F]{4}$/;

/**
 * The same question over a body that streams, chunk by chunk (chunk boundaries anywhere, escapes split
 * included), with fewer false alarms: escapes are decoded as a JSON parser decodes them, so only a
 * string that reads `"task` after decoding counts (a `\u00e9` in some text does not).
 */
export class TaskMentionScanner {
  /** The last bytes seen, escapes decoded, as latin1 characters (TAIL_LENGTH at most). */
  #tail = '';
  /** An escape in progress: '' none, '\\' after a backslash, '\\u' and up to 3 hex digits after that. */
  #escape = '';
  #seen = false;

  /** True once the body so far holds a mention (and from then on). */
  feed(chunk: Buffer): boolean {
    if (this.#seen) return true;
    let tail = this.#tail;
    for (let i = 0; i < chunk.length; i++) {
      const c = String.fromCharCode(chunk[i]!);
      let decoded: string | undefined;
      if (this.#escape === '') {
        if (c === '\\') this.#escape = '\\';
        else decoded = c;
      } else if (this.#escape === '\\') {
        if (c === 'u') this.#escape = '\\u';
        else {
          this.#escape = '';
          // \" and \/ read as themselves; every other short escape is a control or a backslash.
          decoded = c === '"' || c === '/' ? c : '\u0000';
        }
      } else {
        this.#escape += c;
        if (this.#escape.length < 6) continue;
        const hex = this.#escape.slice(2);
        this.#escape = '';
        decoded = HEX4.test(hex) ? escaped(parseInt(hex, 16)) : '\u0000';
      }
      if (decoded === undefined) continue;
      if (decoded >= 'A' && decoded <= 'Z') decoded = decoded.toLowerCase();
      tail = (tail + decoded).slice(-TAIL_LENGTH);
      if (MENTION_AT_END.test(tail)) {
        this.#seen = true;
        return true;
      }
    }
    this.#tail = tail;
    return false;
  }
}

/** A `\uXXXX` escape as the scanner compares it: ASCII as itself, U+017F as `s`, U+212A as `k`, anything else as NUL. */
function escaped(code: number): string {
  if (code < 0x80) return String.fromCharCode(code);
  if (code === 0x17f) return 's';
  if (code === 0x212a) return 'k';
  return '\u0000';
}
