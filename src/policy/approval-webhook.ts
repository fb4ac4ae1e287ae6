// The approval webhook: a POST for each call held for approval, so a chat tool or an on-call system can
// tell the approvers. Signed (`X-Signature: sha256=<hex HMAC-SHA-256 of the body>` under
// `policy.approval.webhookSecret`), sent in the background with a timeout, never followed on a
// redirect, bounded in flight: the held call's answer never waits for it, and a failure is logged
// (without the URL's query or the secret) and counted, nothing more.

import { createHmac } from 'node:crypto';
import type { ApprovalRecord } from '../model/approvals.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';

const TIMEOUT_MS = 5000;
const MAX_IN_FLIGHT = 64;

export interface ApprovalWebhookOptions {
  url: string;
  secret: string;
  logger: Logger;
  metrics: Metrics;
  timeoutMs?: number;
}

/** The JSON a webhook receives: what to decide and where, never the arguments themselves. */
export function webhookBody(approval: ApprovalRecord, url: string): string {
  const who = approval.clientId !== undefined ? `${approval.subject} (through ${approval.clientId})` : approval.subject;
  return JSON.stringify({
    approvalId: approval.approvalId,
    tool: approval.tool,
    caller: approval.subject,
    ...(approval.clientId !== undefined ? { client: approval.clientId } : {}),
    url,
    expiresAt: approval.expiresAt,
    text: `${who} asks to run the tool "${approval.tool}": approve or deny at ${url} before ${new Date(approval.expiresAt).toISOString()}`,
  });
}

export function webhookSignature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export class ApprovalWebhook {
  readonly #o: ApprovalWebhookOptions;
  #inFlight = 0;
  /** The latest deliveries, for a graceful stop and for tests. */
  readonly pending = new Set<Promise<void>>();

  constructor(options: ApprovalWebhookOptions) {
    this.#o = options;
  }

  /** Sends the notice in the background; returns at once, with the delivery (it never rejects). */
  notify(approval: ApprovalRecord, url: string): Promise<void> | undefined {
    if (this.#inFlight >= MAX_IN_FLIGHT) {
      this.#failed(approval, 'too many deliveries in flight');
      return undefined;
    }
    this.#inFlight++;
    const delivery = this.#send(approval, url).finally(() => {
      this.#inFlight--;
      this.pending.delete(delivery);
    });
    this.pending.add(delivery);
    return delivery;
  }

  async #send(approval: ApprovalRecord, url: string): Promise<void> {
    const body = webhookBody(approval, url);
    try {
      const res = await fetch(this.#o.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-signature': webhookSignature(this.#o.secret, body) },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.#o.timeoutMs ?? TIMEOUT_MS),
      });
      await res.body?.cancel();
      if (res.status < 200 || res.status > 299) this.#failed(approval, `answered ${res.status}`);
    } catch (err) {
      this.#failed(approval, (err as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable');
    }
  }

  #failed(approval: ApprovalRecord, reason: string): void {
    this.#o.metrics.approvals.labels(approval.rule, 'webhook_failed').inc();
    const target = new URL(this.#o.url);
    this.#o.logger.warn(
      { approvalId: approval.approvalId, rule: approval.rule, webhook: `${target.origin}${target.pathname}`, reason },
      'approval webhook failed: the call stays held, approvers were not notified',
    );
  }
}
