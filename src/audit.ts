// The audit trail: every admin operation, every issuance and every revocation is one event
// {at, who, action, result, clientId?, tokenHashPrefix?, subject?, detail?}. Each event is one log line
// (`"msg":"audit"`, at info; warn for a refresh-token reuse) and, with `audit.stream: true`, one entry
// of the capped Redis stream `<keyPrefix>audit` (XADD ... MAXLEN ~ audit.maxLen), which the admin
// operation `listAuditEvents` reads back.
//
// No secret is ever part of an event: a token appears as the first 8 hex characters of its SHA-256.
// The capped stream keeps what was done with a credential (the master token, an authenticated client,
// a user's token or IdP JWT), so a flood cannot push admin and security events out of it. What anyone
// can cause without one goes to the log only: every event of a caller that did not authenticate
// (`who: anonymous`: refusals, and open registrations), and low-value events such as a revocation
// that revoked nothing (`logOnly`). Failures because the store is down go to the log only too
// (appending would fail the same way, and only delay the 503).
// Recording never throws: an audit stream that cannot be written is a warning, not a failed request.

import { isClientIdShaped } from './clients.ts';
import type { Clock } from './clock.ts';
import { describe, type Logger } from './logger.ts';
import type { AuditEvent, AuditStorage, StoredAuditEvent } from './store/types.ts';

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

  constructor(options: AuditOptions) {
    this.#options = options;
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
      await this.#options.store.appendAudit(event, this.#options.maxLen);
    } catch (err) {
      this.#options.logger.warn({ err: describe(err), action: event.action }, 'audit event not appended to the audit stream');
    }
  }

  /** A low-value event (one anyone can cause in bulk): the log only, never the capped stream. */
  logOnly(input: AuditInput): void {
    this.#log(input, 'info');
  }

  #log(input: AuditInput, level: 'info' | 'warn'): AuditEvent {
    const event: AuditEvent = { at: this.#options.clock.now(), who: clip(input.who), action: clip(input.action), result: clip(input.result) };
    // Client ids reach here unverified too (the one a refused request presented): only a value shaped
    // like an id this sidecar issues is written down, so a token pasted into that field never is.
    if (input.clientId !== undefined && isClientIdShaped(input.clientId)) event.clientId = input.clientId;
    if (input.tokenHashPrefix !== undefined) event.tokenHashPrefix = hashPrefix(input.tokenHashPrefix);
    if (input.subject !== undefined) event.subject = clip(input.subject);
    if (input.detail !== undefined) event.detail = input.detail;
    this.#options.logger[level]({ audit: event }, 'audit');
    return event;
  }

  /** The newest `count` events of the stream (empty when the stream is off and was never written). */
  list(count: number): Promise<StoredAuditEvent[]> {
    return this.#options.store.listAuditEvents(count);
  }
}
