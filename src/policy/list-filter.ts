// Filters the answers to tools/list, prompts/list, resources/list and resources/templates/list: entries
// the principal may not use are removed, so a client never offers its user a tool that would be refused.
// On a POST's answer only responses to its list requests are filtered (the caller knows their ids); on a
// GET stream, which carries a POST's answers again when a client resumes with Last-Event-ID, every
// response whose result holds a list array. Every other message, and every other byte of an SSE stream,
// passes as it came. `nextCursor` is kept: pagination still works.

import { decide, LIST_METHODS, type Policy, type PolicyPrincipal } from './rules.ts';

/** JSON-RPC ids of the list requests in one POST, with the list method each asked for. */
export type ListRequests = ReadonlyMap<string | number, string>;

/**
 * The list answers to filter: a POST's, by the ids of its list requests; or `replayed`, for a GET
 * stream: a resumption (Last-Event-ID) replays answers to requests of an earlier POST, whose ids the
 * sidecar no longer knows, so every response there is filtered as each list its result holds.
 */
export type ListAnswers = ListRequests | 'replayed';

/** The list methods whose answer `message` (a JSON-RPC response) is taken to be. */
function listMethodsOf(answers: ListAnswers, message: Record<string, unknown>): readonly string[] {
  if (answers === 'replayed') {
    const result = message.result;
    if (typeof result !== 'object' || result === null) return [];
    return [...LIST_METHODS]
      .filter(([, shape]) => Array.isArray((result as Record<string, unknown>)[shape.items]))
      .map(([method]) => method);
  }
  const id = message.id;
  const method = typeof id === 'string' || typeof id === 'number' ? answers.get(id) : undefined;
  return method === undefined ? [] : [method];
}

/** Removes from `result[items]` the entries this principal may not use; returns how many were removed. */
export function filterListResult(policy: Policy, principal: PolicyPrincipal, listMethod: string, result: unknown): number {
  const shape = LIST_METHODS.get(listMethod);
  if (shape === undefined || typeof result !== 'object' || result === null) return 0;
  const entries = (result as Record<string, unknown>)[shape.items];
  if (!Array.isArray(entries)) return 0;
  const kept = entries.filter((entry) => {
    const name = typeof entry === 'object' && entry !== null ? (entry as Record<string, unknown>)[shape.field] : undefined;
    // An entry without a readable name cannot be decided: it is not shown.
    return typeof name === 'string' && decide(policy, principal, { method: shape.method, name }).effect !== 'deny';
  });
  (result as Record<string, unknown>)[shape.items] = kept;
  return entries.length - kept.length;
}

/**
 * Filters the list responses among `messages` (one JSON-RPC message or a batch, parsed); returns the
 * JSON text to send, or undefined when nothing in it answers a list request (send the original bytes).
 */
export function filterMessages(policy: Policy, principal: PolicyPrincipal, answers: ListAnswers, parsed: unknown): string | undefined {
  const items = Array.isArray(parsed) ? parsed : [parsed];
  let touched = false;
  for (const item of items) {
    if (typeof item !== 'object' || item === null) continue;
    const message = item as Record<string, unknown>;
    if (!('result' in message)) continue;
    for (const method of listMethodsOf(answers, message)) {
      filterListResult(policy, principal, method, message.result);
      touched = true;
    }
  }
  return touched ? JSON.stringify(parsed) : undefined;
}

/** Bound on one SSE event held while it is parsed; past it the stream is cut, never passed unfiltered. */
export const MAX_SSE_EVENT_BYTES = 8 * 1024 * 1024;

/**
 * Rewrites an SSE stream of JSON-RPC messages, fed chunk by chunk: each event's `data` lines are
 * joined and parsed; what `rewrite` returns for the parsed data (undefined: leave it) replaces it, every
 * other event is passed as it came. Lines end where an SSE client ends them (CRLF, LF or a lone CR), and every line ending is
 * forwarded as LF: the client then cuts the stream into exactly the events that were decided (an
 * upstream's lone-CR event would otherwise be one event here and two at the client, its list unread).
 * Synchronous, so the caller keeps its own backpressure: what `feed` returns is written where the chunk
 * would have been.
 */
export class SseMessageRewriter {
  #pending = '';
  /** The text so far ended with CR: a LF that starts the next chunk belongs to it (one CRLF). */
  #endedWithCr = false;
  readonly #decoder = new TextDecoder('utf-8');
  readonly #rewriteMessages: (parsed: unknown) => string | undefined;

  constructor(rewriteMessages: (parsed: unknown) => string | undefined) {
    this.#rewriteMessages = rewriteMessages;
  }

  /** The complete events `chunk` finishes, rewritten; throws past MAX_SSE_EVENT_BYTES. */
  feed(chunk: Buffer): string {
    this.#pending += this.#lineFeeds(this.#decoder.decode(chunk, { stream: true }));
    let out = '';
    for (;;) {
      const end = eventEnd(this.#pending);
      if (end === undefined) break;
      out += this.#rewrite(this.#pending.slice(0, end.at)) + this.#pending.slice(end.at, end.at + end.length);
      this.#pending = this.#pending.slice(end.at + end.length);
    }
    if (this.#pending.length > MAX_SSE_EVENT_BYTES) throw new Error('an SSE event larger than the bound on one read event');
    return out;
  }

  /** What is left when the stream ends (an event without its blank line). */
  end(): string {
    this.#pending += this.#lineFeeds(this.#decoder.decode());
    const rest = this.#pending.length > 0 ? this.#rewrite(this.#pending) : '';
    this.#pending = '';
    return rest;
  }

  /** `text` with CRLF, and CR alone, as LF; a CRLF split between two chunks counts once. */
  #lineFeeds(text: string): string {
    const rest = this.#endedWithCr && text.startsWith('\n') ? text.slice(1) : text;
    if (text.length > 0) this.#endedWithCr = text.endsWith('\r');
    return rest.replace(/\r\n?/g, '\n');
  }

  /** One event's text (without its terminating blank line). */
  #rewrite(event: string): string {
    const lines = event.split('\n');
    const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(l.startsWith('data: ') ? 6 : 5));
    if (data.length === 0) return event;
    let parsed: unknown;
    try {
      parsed = JSON.parse(data.join('\n'));
    } catch {
      return event;
    }
    const filtered = this.#rewriteMessages(parsed);
    if (filtered === undefined) return event;
    const others = lines.filter((l) => !l.startsWith('data:'));
    return [...others, `data: ${filtered}`].join('\n');
  }
}

/** An SSE stream that answers list requests: a response to one of `lists` is filtered (filterMessages). */
export class SseListRewriter extends SseMessageRewriter {
  constructor(policy: Policy, principal: PolicyPrincipal, lists: ListAnswers) {
    super((parsed) => filterMessages(policy, principal, lists, parsed));
  }
}

/** Where the first event of `text` (line endings already LF) ends: its blank line's index and length. */
function eventEnd(text: string): { at: number; length: number } | undefined {
  const at = text.indexOf('\n\n');
  return at === -1 ? undefined : { at, length: 2 };
}
