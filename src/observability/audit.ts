// The audit trail: every admin operation, every issuance and every revocation is one event
// {eventId, at, who, action, result, clientId?, tokenHashPrefix?, subject?, detail?}; `eventId` is a
// random UUID (unguessable, so quoting one proves nothing), the name a client is given for the event
// that recorded its refusal (a policy denial's `authorizationContextId`). Each event is one log line
// (`"msg":"audit"`, at info; warn for a refresh-token reuse) and, with `audit.stream: true`, one entry
// of a capped Redis stream (XADD ... MAXLEN ~ audit.maxLen), which the admin operation
// `listAuditEvents` reads back, both streams merged newest first: what the master token did goes to
// `<keyPrefix>audit:admin`, everything else to `<keyPrefix>audit`. Only the master token writes the
// admin stream, so no flood of requests, however authenticated, can evict an admin event.
//
// Repeated denials are aggregated (`recordRepeated`, the policy's): the first of a kind (same
// principal, action, result and detail) within `REPEAT_WINDOW_MS` is recorded at once, the rest of
// the window only counted, and one more event with `detail.repeated` = that count closes the window.
// Every repeat is named by the first event's id (it is the event that records that kind of denial),
// and the closing event, an event of its own with its own id, carries it as `detail.firstEventId`.
// Distinct kinds per principal and action are bounded too (`MAX_KINDS_PER_ACTOR`; further ones
// are folded into one kind whose `detail.name` is `*`), so varying a tool name does not undo it.
//
// No secret is ever part of an event: a token appears as the first 8 hex characters of its SHA-256.
// The capped stream keeps what was done with a credential (the master token, an authenticated client,
// a user's token or IdP JWT), so a flood cannot push admin and security events out of it. What anyone
// can cause without one goes to the log only: every event of a caller that did not authenticate
// (`who: anonymous`: refusals, and open registrations), and low-value events such as a revocation
// that revoked nothing (`logOnly`). Failures because the store is down go to the log only too
// (appending would fail the same way, and only delay the 503).
// Recording never throws: an audit stream that cannot be written is a warning, not a failed request.

import { randomUUID } from 'node:crypto';
import { isClientIdShaped } from '../model/clients.ts';
import type { Clock } from '../model/clock.ts';
import { describe, type Logger } from './logger.ts';
import type { AuditEvent, AuditStorage, StoredAuditEvent } from '../store/types.ts';

export type { AuditEvent, StoredAuditEvent };

export type AuditInput = Omit<AuditEvent, 'at'>;

export interface AuditOptions {
  logger: Logger;
  store: AuditStorage;
  clock: Clock;
  /** Append to the Redis stream as well as to the log. */
  stream: boolean;
  maxLen: number;
}

const MAX_TEXT = 200;
/** How long repeats of one denial are counted before their count is recorded. */
export const REPEAT_WINDOW_MS = 60_000;
/** Distinct kinds of one actor's repeated events within a window before they are folded together. */
const MAX_KINDS_PER_ACTOR = 20;
/** Kinds held at once in this process; past it, events are recorded one by one (never dropped). */
const MAX_KINDS = 10_000;

interface Repeats {
  input: AuditInput;
  level: 'info' | 'warn';
  /** Epoch ms at which the window of this kind ends. */
  until: number;
  /** Repeats after the first (which was recorded) within the window. */
  count: number;
}

/** The first 8 hex characters of a token hash: enough to find a record, useless to an attacker. */
export function hashPrefix(tokenHash: string): string {
  return tokenHash.slice(0, 8);
}

export function clientActor(clientId: string): string {
  return `client:${clientId}`;
}

function clip(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

export class Audit {
  readonly #options: AuditOptions;
  /** Open windows of repeated events, by kind. */
  readonly #repeats = new Map<string, Repeats>();
  /** Distinct kinds per actor (`who` and action) in the open windows. */
  readonly #kinds = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: AuditOptions) {
    this.#options = options;
  }

  /**
   * An event anyone holding a credential can cause in bulk (a policy denial): aggregated as the module
   * comment says. Returns the id of the event that records it (the window's first); the recording goes
   * on in the background and never rejects.
   */
  recordRepeated(input: AuditInput, level: 'info' | 'warn' = 'info'): string {
    const now = this.#options.clock.now();
    // The summaries of windows that closed are written beside this event, not before it (record never rejects).
    void Promise.all(this.#closeWindows(now));
    const actor = `${input.who}\n${input.action}`;
    let kind = kindOf(input);
    let event = input;
    if (!this.#repeats.has(kind) && (this.#kinds.get(actor) ?? 0) >= MAX_KINDS_PER_ACTOR) {
      event = { ...input, detail: { ...input.detail, name: '*' } };
      kind = kindOf(event);
    }
    const open = this.#repeats.get(kind);
    if (open !== undefined) {
      open.count++;
      return open.input.eventId!;
    }
    const eventId = randomUUID();
    event = { ...event, eventId };
    if (this.#repeats.size < MAX_KINDS) {
      this.#repeats.set(kind, { input: event, level, until: now + REPEAT_WINDOW_MS, count: 0 });
      this.#kinds.set(actor, (this.#kinds.get(actor) ?? 0) + 1);
      // A real-time backstop, so a count is recorded even when nothing else happens (unref: it never holds the process).
      this.#timer ??= setInterval(() => void this.flushRepeated(this.#options.clock.now()), REPEAT_WINDOW_MS).unref();
    }
    void this.record(event, level);
    return eventId;
  }

  /** Records the counts of the windows ended by `now` (all of them when `now` is Infinity, at shutdown). */
  async flushRepeated(now = Number.POSITIVE_INFINITY): Promise<void> {
    await Promise.all(this.#closeWindows(now));
    if (this.#repeats.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #closeWindows(now: number): Promise<void>[] {
    const done: Promise<void>[] = [];
    for (const [kind, open] of this.#repeats) {
      if (open.until > now) continue;
      this.#repeats.delete(kind);
      const actor = `${open.input.who}\n${open.input.action}`;
      const left = (this.#kinds.get(actor) ?? 1) - 1;
      if (left > 0) this.#kinds.set(actor, left);
      else this.#kinds.delete(actor);
      if (open.count > 0) {
        const { eventId: firstEventId, ...first } = open.input;
        const detail = {
          ...first.detail,
          repeated: open.count,
          windowSeconds: REPEAT_WINDOW_MS / 1000,
          ...(firstEventId !== undefined ? { firstEventId } : {}),
        };
        done.push(this.record({ ...first, detail }, open.level));
      }
    }
    return done;
  }

  get streamEnabled(): boolean {
    return this.#options.stream;
  }

  /** Logs the event and, when it qualifies, appends it to the stream. Resolves once both are done; never rejects. */
  async record(input: AuditInput, level: 'info' | 'warn' = 'info'): Promise<void> {
    const event = this.#log(input, level);
    if (!this.#options.stream) return;
    if (event.result === 'temporarily_unavailable') return;
    if (event.who === 'anonymous') return;
    try {
      await this.#options.store.appendAudit(event, this.#options.maxLen, event.who === 'master' ? 'admin' : 'requests');
    } catch (err) {
      this.#options.logger.warn({ err: describe(err), action: event.action }, 'audit event not appended to the audit stream');
    }
  }

  /** A low-value event (one anyone can cause in bulk): the log only, never the capped stream. */
  logOnly(input: AuditInput): void {
    this.#log(input, 'info');
  }

  #log(input: AuditInput, level: 'info' | 'warn'): AuditEvent {
    const event: AuditEvent = {
      eventId: input.eventId ?? randomUUID(),
      at: this.#options.clock.now(),
      who: clip(input.who),
      action: clip(input.action),
      result: clip(input.result),
    };
    // Client ids reach here unverified too (the one a refused request presented): only a value shaped
    // like an id this sidecar issues is written down, so a token pasted into that field never is.
    if (input.clientId !== undefined && isClientIdShaped(input.clientId)) event.clientId = input.clientId;
    if (input.tokenHashPrefix !== undefined) event.tokenHashPrefix = hashPrefix(input.tokenHashPrefix);
    if (input.subject !== undefined) event.subject = clip(input.subject);
    if (input.detail !== undefined) event.detail = input.detail;
    this.#options.logger[level]({ audit: event }, 'audit');
    return event;
  }

  /** The newest `count` events of both streams, newest first (empty when the streams are off and were never written). */
  list(count: number): Promise<StoredAuditEvent[]> {
    return this.#options.store.listAuditEvents(count);
  }
}

/** What makes two events the same kind for aggregation: everything but the time. */
function kindOf(input: AuditInput): string {
  return JSON.stringify([
    input.who,
    input.action,
    input.result,
    input.clientId ?? '',
    input.subject ?? '',
    input.tokenHashPrefix ?? '',
    input.detail ?? {},
  ]);
}
