// The approval page of a held call (docs/approval.md):
//   GET  /approve/<id>   the person signs in at the IdP (the account page's session), and, when the
//                        approval's rule lets them decide, sees the call complete: tool, arguments
//                        (pretty-printed, escaped), caller, client, when; Approve / Deny while pending
//   POST /approve/<id>   the decision (CSRF token bound to the session and the approval, same origin)
// Anyone else gets a 403 page and decides nothing. The link is a pointer, not a right: who may decide is
// the rule's approvers, checked at each step against the signed-in person. Pages are never framed
// (PAGE_HEADERS: frame-ancestors 'none', X-Frame-Options DENY).

import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApprovalRecord } from '../model/approvals.ts';
import { mayDecide } from '../policy/approval-settings.ts';
import type { AccountSession, ApprovalStorage } from '../store/types.ts';
import { AccountPageError, csrfMatches, sessionForm, type AccountSessions } from './account.ts';
import type { OAuthContext } from './context.ts';
import { escapeHtml, page, writePage } from '../web/pages.ts';

const ID = /^[0-9a-f]{32}$/;
const FORM_MAX_BODY_BYTES = 4096;
const MAX_REASON = 500;

const NOT_FOUND = new AccountPageError(404, 'No such approval', 'This approval link is unknown, or its request has been forgotten.');
const NOT_YOURS = new AccountPageError(
  403,
  'Not yours to decide',
  'You are signed in as someone this call does not ask to approve it. Nothing was decided.',
);
const FORGED = new AccountPageError(403, 'Request refused', 'This form did not come from the approval page. Open the link again.');
const BAD_FORM = new AccountPageError(400, 'Bad request', 'The form is incomplete or malformed. Open the link again.');

/** Who decided, as the approval records it and the caller may read it: the email, else the IdP subject. */
export function deciderOf(user: AccountSession['user']): string {
  return user.email ?? user.subject;
}

/** What the approval pages use of the OAuth context. */
type ApprovalPageContext = Pick<OAuthContext, 'clock' | 'publicUrl' | 'audit' | 'metrics'> & { store: ApprovalStorage };

export class ApprovalPages {
  readonly #ctx: ApprovalPageContext;
  readonly #sessions: AccountSessions;

  constructor(ctx: ApprovalPageContext, sessions: AccountSessions) {
    this.#ctx = ctx;
    this.#sessions = sessions;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.#sessions.available) throw new AccountPageError(404, 'Not available', 'Browser sign-in is not configured on this server.');
    const id = (req.url ?? '').split('?')[0]!.slice('/approve/'.length);
    if (!ID.test(id)) throw NOT_FOUND;
    if (req.method === 'POST') await this.#decide(req, res, id);
    else await this.#show(req, res, id);
  }

  async #approval(id: string): Promise<ApprovalRecord> {
    const approval = await this.#ctx.store.getApproval(id);
    if (approval === null || approval === 'corrupt') throw NOT_FOUND;
    return approval;
  }

  #csrf(sessionValue: string, id: string): string {
    return createHash('sha256').update(`mcp-bearer-proxy approval csrf\0${sessionValue}\0${id}`).digest('hex');
  }

  async #show(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const approval = await this.#approval(id);
    const current = await this.#sessions.current(req);
    if (current === undefined) {
      await this.#sessions.startSignIn(res, `/approve/${id}`);
      return;
    }
    if (!mayDecide(approval, current.session.user)) throw NOT_YOURS;
    writePage(res, 200, this.#page(approval, this.#csrf(current.value, id)));
  }

  async #decide(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const { form, ...current } = await sessionForm(req, this.#sessions, this.#ctx.publicUrl(), {
      forged: FORGED,
      malformed: BAD_FORM,
      maxBytes: FORM_MAX_BODY_BYTES,
    });
    if (!csrfMatches(form.get('csrf'), this.#csrf(current.value, id))) throw FORGED;
    const decision = form.get('decision');
    const reason = form.get('reason')?.trim();
    if ((decision !== 'approve' && decision !== 'deny') || (reason !== undefined && reason.length > MAX_REASON)) throw BAD_FORM;
    const approval = await this.#approval(id);
    const { user } = current.session;
    if (!mayDecide(approval, user)) throw NOT_YOURS;
    const now = this.#ctx.clock.now();
    const outcome = await this.#ctx.store.decideApproval(id, now, {
      approve: decision === 'approve',
      by: deciderOf(user),
      reason: reason === undefined || reason === '' ? undefined : reason,
    });
    if ('state' in outcome) this.#ctx.metrics.approvals.labels(approval.rule, outcome.state).inc();
    await this.#ctx.audit.record({
      who: 'user',
      action: 'approval_decided',
      result: 'state' in outcome ? 'ok' : outcome.refusal,
      subject: user.subject,
      ...(approval.clientId !== undefined ? { clientId: approval.clientId } : {}),
      detail: { approvalId: id, rule: approval.rule, decision, caller: approval.subject },
    });
    writePage(
      res,
      200,
      this.#page(await this.#approval(id), undefined, 'state' in outcome ? undefined : 'This call was already decided, or its time is up.'),
    );
  }

  #page(a: ApprovalRecord, csrf: string | undefined, notice?: string): string {
    const time = (ms: number) => new Date(ms).toISOString();
    let args: string;
    try {
      args = JSON.stringify(JSON.parse(a.arguments), null, 2);
    } catch {
      args = a.arguments;
    }
    const rows: [string, string][] = [
      ['Tool', a.tool],
      ['Caller', a.issuer !== undefined ? `${a.subject} (${a.issuer})` : a.subject],
      ['Client', a.clientId ?? 'a user token'],
      ['Requested', time(a.requestedAt)],
      ['Expires', time(a.expiresAt)],
      ['State', a.state + (a.decidedBy !== undefined ? ` by ${a.decidedBy}` : '') + (a.reason !== undefined ? `: ${a.reason}` : '')],
    ];
    const action = `${this.#ctx.publicUrl()}/approve/${a.approvalId}`;
    const form =
      a.state === 'pending' && csrf !== undefined
        ? `<form method="post" action="${escapeHtml(action)}"><input type="hidden" name="csrf" value="${csrf}">
<p><label>Reason (shown to the caller on a denial)<br><textarea name="reason" maxlength="${MAX_REASON}" rows="2" cols="40"></textarea></label></p>
<p><button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="deny">Deny</button></p></form>`
        : '';
    return page(
      'Approve a tool call',
      `<h1>Approve a tool call</h1>${notice ? `<p><strong>${escapeHtml(notice)}</strong></p>` : ''}
<dl>${rows.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join('')}</dl>
<p>Arguments, complete:</p><pre class="mono">${escapeHtml(args)}</pre>${form}`,
    );
  }
}
