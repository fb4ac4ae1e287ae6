// A call an `approve` rule holds: never forwarded until a person approved exactly this call. The call is
// bound to a digest of who makes it (issuer, subject), through which client, which tool, with which
// arguments (canonical JSON); a retry finds its approval by that digest and uses it once, atomically
// across replicas (store.useApproval). Until then the caller is answered in the form its protocol reads:
// - MCP 2025-11-25 and earlier, URL elicitation declared: the error -32042 whose
//   `data.elicitations[0]` is `{mode: "url", url, elicitationId, message}`;
// - MCP 2026-07-28 (the `MCP-Protocol-Version` header), URL elicitation declared on the request: the
//   multi round-trip result `{resultType: "input_required", inputRequests, requestState}`, the
//   `requestState` signed here (HMAC-SHA-256 under a key derived from the master token, bound to the
//   digest and the approval's expiry) and verified when a retry echoes it;
// - otherwise: a tool error whose text names the link.
// A denied call is answered as every policy denial no scope lifts (a tool error), with the approver's
// reason. The forwarded retry loses `params.requestState` and `params.inputResponses`: the upstream
// never sees the sidecar's fields.

import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../http/errors.ts';
import { approvalDigest, canonicalJson, type ApprovalRecord } from '../model/approvals.ts';
import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import type { Audit } from '../observability/audit.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { ApprovalStorage } from '../store/types.ts';
import { approversText } from './approval-settings.ts';
import { AUTHORIZATION_META_KEY, URL_ELICITATION_REQUIRED, type HeldCall } from './enforce.ts';

/** The first protocol revision that answers with the multi round-trip form instead of -32042. */
export const INPUT_REQUIRED_SINCE = '2026-07-28';
/** How long an approval's record is kept after it expires (the list, a late retry told it expired). */
const RETAIN_MS = 3_600_000;
const MAX_REQUEST_STATE = 512;

/** How the caller reads the answer: its protocol revision and whether it declared URL elicitation. */
export interface HeldCaller {
  readonly principal: Principal;
  readonly protocolVersion: string | undefined;
  readonly urlElicitation: boolean;
}

export interface ApprovalHoldOptions {
  store: ApprovalStorage;
  clock: Clock;
  metrics: Metrics;
  audit: Audit;
  publicUrl(): string;
  /** Every replica has it: the key that signs `requestState` is derived from it. */
  masterToken: string;
  /**
   * Told of each new request (the webhook); never awaited by the caller's answer. A promise it
   * returns (a delivery) is awaited by a graceful stop (deliveriesSettled).
   */
  requested?: ((approval: ApprovalRecord, url: string) => Promise<void> | void) | undefined;
}

/**
 * What becomes of a held call: forward this body (its approval is now used), or answer with this one
 * (`denied`: a person denied the call; else the link to approve it).
 */
export type HoldOutcome = { readonly forward: Buffer } | { readonly answer: string; readonly denied: boolean };

export class ApprovalHold {
  readonly #o: ApprovalHoldOptions;
  readonly #stateKey: Buffer;
  /** Notices of requests still being delivered. */
  readonly #deliveries = new Set<Promise<void>>();

  constructor(options: ApprovalHoldOptions) {
    this.#o = options;
    this.#stateKey = Buffer.from(hkdfSync('sha256', options.masterToken, 'mcp-bearer-proxy', 'approval request state v1', 32));
  }

  /** The held call `held` of `caller`, whose body as decided is `canonical`. */
  async hold(held: HeldCall, caller: HeldCaller, canonical: Buffer): Promise<HoldOutcome> {
    const { store, clock, metrics } = this.#o;
    const { principal } = caller;
    const now = clock.now();
    const issuer = issuerOf(principal);
    const args = held.call.arguments ?? {};
    const digest = approvalDigest({
      issuer,
      subject: principal.subject,
      clientId: principal.clientId,
      tool: held.call.name,
      arguments: args,
    });
    if (held.requestState !== undefined && !this.#verifies(held.requestState, digest))
      throw new HttpError('invalid_request', 'requestState does not verify for this call (altered, expired, or for other arguments)');
    const use = await store.useApproval(digest, now);
    if (use.outcome === 'forward') {
      metrics.approvals.labels(held.rule, 'used').inc();
      this.#event('approval_used', use.approval, principal);
      return { forward: withoutRetryFields(canonical) };
    }
    if (use.outcome === 'denied') {
      metrics.approvals.labels(held.rule, 'refused').inc();
      return { answer: this.#deniedAnswer(held, use.approval, principal), denied: true };
    }
    if (use.outcome === 'none' && use.expired !== undefined) {
      metrics.approvals.labels(use.expired.rule, 'expired').inc();
      this.#event('approval_expired', use.expired, principal);
    }
    const approval = use.outcome === 'pending' ? use.approval : await this.#request(held, principal, issuer, digest, args, now);
    return { answer: this.#elicitation(held, caller, approval), denied: false };
  }

  async #request(held: HeldCall, principal: Principal, issuer: string | undefined, digest: string, args: unknown, now: number) {
    const approval: ApprovalRecord = {
      approvalId: randomBytes(16).toString('hex'),
      argumentsDigest: digest,
      rule: held.rule,
      subject: principal.subject,
      ...(issuer !== undefined ? { issuer } : {}),
      ...(principal.clientId !== undefined ? { clientId: principal.clientId } : {}),
      tool: held.call.name,
      arguments: canonicalJson(args),
      approvers: approversText(held.approval.approvers),
      notSelf: held.approval.notSelf,
      state: 'pending',
      requestedAt: now,
      expiresAt: now + held.approval.ttlSeconds * 1000,
    };
    await this.#o.store.putApproval(approval, RETAIN_MS);
    this.#o.metrics.approvals.labels(held.rule, 'requested').inc();
    this.#event('approval_requested', approval, principal);
    const delivery = this.#o.requested?.(approval, this.urlOf(approval.approvalId));
    if (delivery !== undefined) {
      this.#deliveries.add(delivery);
      void delivery.finally(() => this.#deliveries.delete(delivery));
    }
    return approval;
  }

  /** Resolves once every notice sent so far is delivered or failed (each is bounded by its own timeout). */
  async deliveriesSettled(): Promise<void> {
    await Promise.allSettled([...this.#deliveries]);
  }

  urlOf(approvalId: string): string {
    return `${this.#o.publicUrl()}/approve/${approvalId}`;
  }

  #elicitation(held: HeldCall, caller: HeldCaller, approval: ApprovalRecord): string {
    const url = this.urlOf(approval.approvalId);
    const message = `The tool "${held.call.name}" needs a person's approval before it runs: open ${url} in a browser, then retry the same call.`;
    const modern = caller.protocolVersion !== undefined && caller.protocolVersion >= INPUT_REQUIRED_SINCE;
    const declared = modern ? held.urlElicitation : caller.urlElicitation || held.urlElicitation;
    const { id } = held;
    if (!declared) return JSON.stringify({ jsonrpc: '2.0', id, result: { isError: true, content: [{ type: 'text', text: message }] } });
    if (!modern)
      return JSON.stringify({
        jsonrpc: '2.0',
        id,
        error: {
          code: URL_ELICITATION_REQUIRED,
          message,
          data: { elicitations: [{ mode: 'url', url, elicitationId: approval.approvalId, message }] },
        },
      });
    const requestState = this.#sign(approval);
    return JSON.stringify({
      jsonrpc: '2.0',
      id,
      result: {
        resultType: 'input_required',
        inputRequests: { approval: { method: 'elicitation/create', params: { mode: 'url', url, message } } },
        requestState,
      },
    });
  }

  /** `<approvalId>.<expiresAt>.<HMAC over both and the digest>`: opaque to the client, bound to the call. */
  #sign(approval: ApprovalRecord): string {
    const payload = `${approval.approvalId}.${approval.expiresAt}`;
    return `${payload}.${this.#mac(payload, approval.argumentsDigest)}`;
  }

  #verifies(state: string, digest: string): boolean {
    if (state.length > MAX_REQUEST_STATE) return false;
    const parts = state.split('.');
    if (parts.length !== 3 || !/^[0-9a-f]{32}$/.test(parts[0]!) || !/^[0-9]{1,15}$/.test(parts[1]!)) return false;
    const expected = Buffer.from(this.#mac(`${parts[0]}.${parts[1]}`, digest));
    const given = Buffer.from(parts[2]!);
    // An authentic state past its time is not refused: the store answers for expiry (a new request).
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  #mac(payload: string, digest: string): string {
    return createHmac('sha256', this.#stateKey).update(`${payload}.${digest}`).digest('base64url');
  }

  #deniedAnswer(held: HeldCall, approval: ApprovalRecord, principal: Principal): string {
    const contextId = this.#o.audit.recordRepeated(
      {
        ...actorOf(principal),
        action: 'policy.deny',
        result: 'insufficient_authorization',
        detail: { method: 'tools/call', name: held.call.name, rule: held.rule, approvalId: approval.approvalId },
      },
      'warn',
    );
    const why = approval.reason !== undefined ? `: "${approval.reason}"` : '';
    const text = `The call of the tool "${held.call.name}" with these arguments was denied by the person asked to approve it${why}. Do not retry it. (Reference: ${contextId})`;
    const context = {
      [AUTHORIZATION_META_KEY]: { reason: 'insufficient_authorization', remediation: 'unavailable', authorizationContextId: contextId },
    };
    return JSON.stringify({ jsonrpc: '2.0', id: held.id, result: { isError: true, content: [{ type: 'text', text }], _meta: context } });
  }

  #event(action: string, approval: ApprovalRecord, principal: Principal): void {
    void this.#o.audit.record({
      ...actorOf(principal),
      action,
      result: 'ok',
      detail: { approvalId: approval.approvalId, rule: approval.rule, tool: approval.tool, argumentsDigest: approval.argumentsDigest },
    });
  }
}

/** The issuer of the caller's IdP, where the principal carries one (a person's token does). */
export function issuerOf(principal: Principal): string | undefined {
  return principal.issuer;
}

function actorOf(principal: Principal) {
  return {
    who: principal.kind === 'master' ? 'master' : principal.clientId !== undefined ? `client:${principal.clientId}` : 'user',
    subject: principal.subject,
    ...(principal.clientId !== undefined ? { clientId: principal.clientId } : {}),
  };
}

/** The decided body without the multi round-trip fields the sidecar consumed (its own output: one parse). */
function withoutRetryFields(canonical: Buffer): Buffer {
  const message = JSON.parse(canonical.toString('utf8')) as { params?: Record<string, unknown> };
  const params = message.params;
  if (params === undefined || (!('requestState' in params) && !('inputResponses' in params))) return canonical;
  delete params.requestState;
  delete params.inputResponses;
  return Buffer.from(JSON.stringify(message));
}
