// The account page: a person signs in at the IdP (the same sign-in and claim rules as /authorize) and
// sees which MCP clients hold a grant for them, which approvals they have given and which upstream
// accounts are connected for them, and revokes any.
//   GET  /account               the page; without a session, off to the IdP (back through /oauth/callback)
//   POST /account/revoke        revokes one grant (its access and refresh tokens at once) and forgets
//                               the approvals of its client
//   POST /account/forget        forgets one remembered approval
//   POST /account/disconnect    deletes one kept upstream credential (a connected account)
//   POST /account/sign-out      ends the session
// The session is a random cookie value (HttpOnly, SameSite=Lax, Secure and __Host- over https, 15
// minutes), stored only as its SHA-256. Every form carries a CSRF token derived from the session value
// (nothing another site can read or compute), checked in constant time, and a POST whose Origin is not
// this server's is refused. Pages are never framed (PAGE_HEADERS). No token or hash is ever shown:
// grants, approvals and connected accounts are named by ids that are neither (a kept credential is
// never decrypted here).

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody, type Form } from '../http/body.ts';
import { clientName, displayableName } from '../model/clients.ts';
import { generateToken, hashToken } from '../model/credentials.ts';
import { revokedSinceSignIn } from '../model/offboarding.ts';
import { grantsOf, tokensOfGrant, type Grant } from '../model/person-grants.ts';
import type { AccountSession, AccountSignInRecord, ApprovalRecord, StoredUpstreamCredential, SubjectConsent } from '../store/types.ts';
import type { OAuthContext } from './context.ts';
import { IdpRejection } from './idp.ts';
import { chooseProvider, type ProviderChoice } from './sign-in/provider-choice.ts';
import { DEACTIVATED_TEXT } from './directory-gate.ts';
import { IdpAuthorizationError, type IdpSignIn } from './oidc-client.ts';
import { readCookie } from '../web/cookies.ts';
import { escapeHtml, page, writePage } from '../web/pages.ts';
import { mayDecide } from '../policy/approval-settings.ts';

/** How long an account-page session lasts: short, it can revoke everything the person holds. */
export const ACCOUNT_SESSION_TTL_MS = 15 * 60 * 1000;
/** How long the IdP round trip of an account sign-in may take. */
const ACCOUNT_SIGN_IN_TTL_MS = 10 * 60 * 1000;
/** A form is a few ids: anything bigger is refused before it is parsed. */
const FORM_MAX_BODY_BYTES = 4096;
const ID = /^[0-9a-f]{32}$/;
/** Most held calls the page looks through for those this person may decide. */
const MAX_APPROVALS_SCANNED = 1000;

/** A refusal shown as a page (never JSON: a person reads it). */
export class AccountPageError extends Error {
  readonly status: number;
  readonly title: string;
  constructor(status: number, title: string, text: string) {
    super(text);
    this.status = status;
    this.title = title;
  }
}

const FORGED = new AccountPageError(
  403,
  'Request refused',
  'This form did not come from your account page (or your session has ended). Open the account page again.',
);
const BAD_FORM = new AccountPageError(400, 'Bad request', 'The form is incomplete or malformed. Open the account page again.');

/** An approval's id on the page: derived from where it is kept, neither the browser's cookie nor its hash. */
function consentIdOf(c: Pick<SubjectConsent, 'browserHash' | 'key'>): string {
  return createHash('sha256').update(`mcp-bearer-proxy consent\0${c.browserHash}\0${c.key}`).digest('hex').slice(0, 32);
}

/** A connected account's id on the page: derived from its (issuer, provider), never from its tokens. */
function connectionIdOf(c: Pick<StoredUpstreamCredential, 'issuer' | 'provider'>): string {
  return createHash('sha256').update(`mcp-bearer-proxy connection\0${c.issuer}\0${c.provider}`).digest('hex').slice(0, 32);
}

/** The CSRF token of a session: bound to its cookie value, which only this browser holds. */
function csrfOf(sessionValue: string): string {
  return createHash('sha256').update(`mcp-bearer-proxy account csrf\0${sessionValue}`).digest('hex');
}

/**
 * The account page's sign-in at the IdP and its session, which the connect pages share: a person who
 * signed in for one is signed in for the other, and proves who they are the same way.
 */
export class AccountSessions {
  readonly #ctx: Pick<OAuthContext, 'store' | 'clock' | 'publicUrl'>;
  readonly #signIn: IdpSignIn | undefined;

  constructor(ctx: Pick<OAuthContext, 'store' | 'clock' | 'publicUrl'>, signIn: IdpSignIn | undefined) {
    this.#ctx = ctx;
    this.#signIn = signIn;
  }

  /** The provider whose issuer is `issuer`, to sign in at (a connect link's person); {} with one provider. */
  choiceFor(issuer: string): ProviderChoice {
    const providers = this.#signIn?.providers ?? [];
    if (providers.length <= 1) return {};
    const provider = providers.find((p) => p.issuer === issuer);
    return provider === undefined ? {} : { provider: provider.name };
  }

  /** Browser sign-in is configured (without it nobody can sign in here). */
  get available(): boolean {
    return this.#signIn !== undefined;
  }

  #secure(): boolean {
    return this.#ctx.publicUrl().startsWith('https:');
  }

  get sessionCookie(): string {
    return this.#secure() ? '__Host-mcp-account' : 'mcp-account';
  }

  get loginCookie(): string {
    return this.#secure() ? '__Host-mcp-account-login' : 'mcp-account-login';
  }

  cookie(name: string, value: string, maxAgeSeconds: number): string {
    const attributes = ['Path=/', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`];
    if (this.#secure()) attributes.push('Secure');
    return `${name}=${value}; ${attributes.join('; ')}`;
  }

  /** The session this browser presents, with its cookie value; undefined when none lives. */
  async current(req: IncomingMessage): Promise<{ value: string; session: AccountSession } | undefined> {
    const value = readCookie(req, this.sessionCookie);
    if (value === undefined) return undefined;
    const session = await this.#ctx.store.getAccountSession(hashToken(value), this.#ctx.clock.now());
    if (session === null) return undefined;
    // A session signed in before its person was offboarded is over: sign-in starts again.
    if (await revokedSinceSignIn(this.#ctx.store, session.user, session.createdAt)) return undefined;
    return { value, session };
  }

  /**
   * Sends the browser to sign in at the IdP (back through /oauth/callback, then to `next`, a path of
   * this server, or the account page), bound to this browser by a cookie.
   */
  async startSignIn(res: ServerResponse, next?: string, choice: ProviderChoice = {}): Promise<void> {
    if (!this.#signIn) throw new AccountPageError(404, 'Not available', 'Browser sign-in is not configured on this server.');
    const { url, login } = await this.#signIn.start(choice.provider, choice.loginHint);
    const binding = generateToken();
    const record: AccountSignInRecord = {
      stage: 'account',
      browserHash: hashToken(binding),
      nonce: login.nonce,
      codeVerifier: login.codeVerifier,
      ...(login.provider !== undefined ? { provider: login.provider } : {}),
      ...(next !== undefined ? { next } : {}),
    };
    await this.#ctx.store.putAuthorizationRequest(hashToken(login.state), record, this.#ctx.clock.now() + ACCOUNT_SIGN_IN_TTL_MS);
    res.writeHead(303, {
      location: url.href,
      'cache-control': 'no-store',
      'set-cookie': this.cookie(this.loginCookie, binding, ACCOUNT_SIGN_IN_TTL_MS / 1000),
      'content-length': '0',
    });
    res.end();
  }
}

/**
 * What a POST of these pages must carry besides its form: the session, and a same-origin request
 * (Origin, when sent, must be this server's; Sec-Fetch-Site, when sent, same-origin). Throws FORGED.
 */
export async function sameSitePost(
  req: IncomingMessage,
  sessions: AccountSessions,
  publicUrl: string,
): Promise<{ value: string; session: AccountSession }> {
  // Browsers send `Origin: null` for a form posted from a page served with Referrer-Policy:
  // no-referrer (these pages are): only another origin named outright is refused here; the CSRF token,
  // the SameSite session cookie and Sec-Fetch-Site cover the rest.
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null' && origin !== new URL(publicUrl).origin) throw FORGED;
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw FORGED;
  const current = await sessions.current(req);
  if (current === undefined) throw FORGED;
  return current;
}

/**
 * The form a signed-in browser posted from one of these pages: its session (sameSitePost) and the
 * form, read within the page's `maxBytes` (413 past it), with the page's own refusal of a post
 * that is not its own (`forged`) and of a body that is not a form (`malformed`). The caller checks
 * the form's CSRF token against the session.
 */
export async function sessionForm(
  req: IncomingMessage,
  sessions: AccountSessions,
  publicUrl: string,
  page: { forged: Error; malformed: Error; maxBytes: number },
): Promise<{ value: string; session: AccountSession; form: Form }> {
  const current = await sameSitePost(req, sessions, publicUrl).catch((err: unknown) => {
    throw err instanceof AccountPageError ? page.forged : err;
  });
  const raw = await readBody(req, page.maxBytes);
  try {
    return { ...current, form: parseForm(req, raw) };
  } catch {
    throw page.malformed;
  }
}

/** A CSRF token checked in constant time against the one expected. */
export function csrfMatches(presented: string | undefined, expected: string): boolean {
  return presented !== undefined && presented.length === expected.length && timingSafeEqual(Buffer.from(presented), Buffer.from(expected));
}

export class AccountPages {
  readonly #ctx: OAuthContext;
  readonly #signIn: IdpSignIn | undefined;
  readonly #sessions: AccountSessions;

  constructor(ctx: OAuthContext, signIn: IdpSignIn | undefined) {
    this.#ctx = ctx;
    this.#signIn = signIn;
    this.#sessions = new AccountSessions(ctx, signIn);
  }

  /** GET /account: the page, or the start of a sign-in at the IdP. */
  async show(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.#signIn) throw new AccountPageError(404, 'Not available', 'Browser sign-in is not configured on this server.');
    const current = await this.#sessions.current(req);
    if (current === undefined) {
      // Several providers: which one first (the chooser page, unless the URL names one).
      const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
      const choice = chooseProvider(this.#signIn, query, res, `${this.#ctx.publicUrl()}/account`);
      if (choice !== undefined) await this.#sessions.startSignIn(res, undefined, choice);
      return;
    }
    await this.#render(res, current.value, current.session);
  }

  /**
   * The IdP's answer to an account sign-in (GET /oauth/callback with that login's state): checked by
   * the same code as any sign-in, then a new session (a new random value: nothing set before sign-in
   * becomes the session) and back to the page.
   */
  async callback(
    req: IncomingMessage,
    res: ServerResponse,
    query: URLSearchParams,
    state: string,
    stored: AccountSignInRecord,
  ): Promise<void> {
    const presented = readCookie(req, this.#sessions.loginCookie);
    if (presented === undefined || !timingSafeEqual(Buffer.from(hashToken(presented), 'hex'), Buffer.from(stored.browserHash, 'hex'))) {
      throw new AccountPageError(
        403,
        'Sign-in refused',
        'This sign-in was started in another browser (or its cookie was blocked). Open the account page again in this browser.',
      );
    }
    let user;
    try {
      // The IdP's tokens are not kept here: the account page needs who signed in, nothing to act as them.
      ({ user } = await this.#signIn!.finish(query, {
        state,
        nonce: stored.nonce,
        codeVerifier: stored.codeVerifier,
        ...(stored.provider !== undefined ? { provider: stored.provider } : {}),
      }));
    } catch (err) {
      // The IdP said no, or its answer broke a claim rule: the same refusal as any sign-in, nothing kept.
      if (!(err instanceof IdpAuthorizationError) && !(err instanceof IdpRejection)) throw err;
      await this.#ctx.audit.record({ who: 'anonymous', action: 'account.sign_in', result: 'access_denied', detail: { by: 'idp' } });
      throw new AccountPageError(
        403,
        'Sign-in refused',
        'Sign-in at the identity provider did not succeed, or this account may not use this server.',
      );
    }
    if (await this.#ctx.directory?.refuses(user)) {
      await this.#ctx.audit.record({
        who: 'user',
        action: 'account.sign_in',
        result: 'access_denied',
        subject: user.subject,
        detail: { by: 'directory' },
      });
      throw new AccountPageError(403, 'Account deactivated', DEACTIVATED_TEXT);
    }
    const value = generateToken();
    const now = this.#ctx.clock.now();
    await this.#ctx.store.putAccountSession(hashToken(value), { user, createdAt: now, expiresAt: now + ACCOUNT_SESSION_TTL_MS });
    await this.#ctx.audit.record({
      who: 'user',
      action: 'account.sign_in',
      result: 'ok',
      subject: user.subject,
      // A person is the subject at its issuer: with several providers the subject alone names no one.
      detail: { issuer: user.issuer },
    });
    res.writeHead(303, {
      location: `${this.#ctx.publicUrl()}${stored.next ?? '/account'}`,
      'cache-control': 'no-store',
      'set-cookie': [
        this.#sessions.cookie(this.#sessions.sessionCookie, value, ACCOUNT_SESSION_TTL_MS / 1000),
        this.#sessions.cookie(this.#sessions.loginCookie, '', 0),
      ],
      'content-length': '0',
    });
    res.end();
  }

  /**
   * A POST of the page: the session, a same-origin request (Origin, when sent, must be this server's),
   * a small form, and its CSRF token; the session and form when all hold.
   */
  async #post(req: IncomingMessage): Promise<{ value: string; session: AccountSession; form: Form }> {
    if (!this.#signIn) throw new AccountPageError(404, 'Not available', 'Browser sign-in is not configured on this server.');
    const posted = await sessionForm(req, this.#sessions, this.#ctx.publicUrl(), {
      forged: FORGED,
      malformed: BAD_FORM,
      maxBytes: FORM_MAX_BODY_BYTES,
    });
    if (!csrfMatches(posted.form.get('csrf'), csrfOf(posted.value))) throw FORGED;
    return posted;
  }

  /** POST /account/revoke: one grant's tokens revoked at once (open streams end), its client's approvals forgotten. */
  async revoke(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { value, session, form } = await this.#post(req);
    const grantId = form.get('grant');
    if (grantId === undefined || !ID.test(grantId)) throw BAD_FORM;
    const { user } = session;
    const now = this.#ctx.clock.now();
    const tokens = tokensOfGrant(await this.#ctx.store.listSubjectTokens(user.subject, now, user.issuer), grantId);
    if (tokens.length === 0) {
      await this.#render(res, value, session, 'That grant had already ended.');
      return;
    }
    const { store } = this.#ctx;
    const refresh = tokens.find((t) => t.kind === 'refresh');
    // A refresh token takes its whole family (every access token issued with it) in one step.
    if (refresh !== undefined) await store.revokeRefreshFamily(refresh.tokenHash, now);
    for (const t of tokens) {
      if (t.kind === 'access' && refresh === undefined) await store.revokeAccessToken(t.tokenHash, now);
      if (t.kind === 'user') await store.revokeUserToken(t.tokenHash);
    }
    const clientId = tokens[0]!.clientId;
    if (clientId !== undefined) {
      for (const c of await store.listSubjectConsents(user.subject, now)) {
        if (c.clientId === clientId && c.issuer === user.issuer) await store.forgetConsent(c.browserHash, c.key, user.subject);
      }
    }
    await this.#ctx.audit.record({
      who: 'user',
      action: 'account.revoke',
      result: 'ok',
      subject: user.subject,
      ...(clientId !== undefined ? { clientId } : {}),
      detail: { tokens: tokens.length },
    });
    await this.#render(res, value, session, 'Revoked: that application can no longer act for you.');
  }

  /** POST /account/forget: one remembered approval forgotten (the application asks again next time). */
  async forget(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { value, session, form } = await this.#post(req);
    const consentId = form.get('consent');
    if (consentId === undefined || !ID.test(consentId)) throw BAD_FORM;
    const { user } = session;
    const found = (await this.#ctx.store.listSubjectConsents(user.subject, this.#ctx.clock.now())).find(
      (c) => c.issuer === user.issuer && consentIdOf(c) === consentId,
    );
    if (found !== undefined) await this.#ctx.store.forgetConsent(found.browserHash, found.key, user.subject);
    await this.#ctx.audit.record({
      who: 'user',
      action: 'account.forget_consent',
      result: found ? 'ok' : 'not_found',
      subject: user.subject,
      ...(found ? { clientId: found.clientId } : {}),
    });
    await this.#render(
      res,
      value,
      session,
      found ? 'Forgotten: that application will ask for your approval again.' : 'That approval had already been forgotten.',
    );
  }

  /**
   * POST /account/disconnect: one kept upstream credential deleted (the person connects it again when
   * next needed). Only a record of the signed-in person's subject and issuer is found by its id.
   */
  async disconnect(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { value, session, form } = await this.#post(req);
    const connectionId = form.get('connection');
    if (connectionId === undefined || !ID.test(connectionId)) throw BAD_FORM;
    const { user } = session;
    const found = (await this.#ctx.store.listSubjectUpstreamCredentials(user.subject)).find(
      (c) => c.issuer === user.issuer && connectionIdOf(c) === connectionId,
    );
    const deleted = found !== undefined && (await this.#ctx.store.deleteUpstreamCredential(user.subject, user.issuer, found.provider));
    await this.#ctx.audit.record({
      who: 'user',
      action: 'account.disconnect',
      result: deleted ? 'ok' : 'not_found',
      subject: user.subject,
      ...(found ? { detail: { provider: found.provider } } : {}),
    });
    await this.#render(
      res,
      value,
      session,
      deleted ? 'Disconnected: that account is no longer used for you.' : 'That account had already been disconnected.',
    );
  }

  /** POST /account/sign-out: the session ends here and in the store. */
  async signOut(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { value } = await this.#post(req);
    await this.#ctx.store.deleteAccountSession(hashToken(value));
    writePage(res, 200, page('Signed out', '<h1>Signed out</h1><p>You are signed out of the account page.</p>'), {
      'set-cookie': this.#sessions.cookie(this.#sessions.sessionCookie, '', 0),
    });
  }

  async #render(res: ServerResponse, value: string, session: AccountSession, notice?: string): Promise<void> {
    const { store, clock } = this.#ctx;
    const { user } = session;
    const now = clock.now();
    const grants = await grantsOf(store, await store.listSubjectTokens(user.subject, now, user.issuer));
    const hosts = new Map<string, string>();
    for (const g of grants) {
      if (g.clientId === null || hosts.has(g.clientId)) continue;
      const client = await store.getClient(g.clientId);
      hosts.set(g.clientId, [...new Set((client && client !== 'corrupt' ? client.redirectUris : []).map(hostOf))].join(', '));
    }
    const consents = (await store.listSubjectConsents(user.subject, now)).filter((c) => c.issuer === user.issuer);
    const names = new Map<string, string | undefined>();
    for (const c of consents) if (!names.has(c.clientId)) names.set(c.clientId, clientName(await store.getClient(c.clientId)));
    const connections = (await store.listSubjectUpstreamCredentials(user.subject)).filter((c) => c.issuer === user.issuer);
    // Calls held for a person's approval that this one may decide (the admin's list, read at most once a page).
    const waiting = (await store.listApprovals(now, MAX_APPROVALS_SCANNED)).filter(
      (a) => a.state === 'pending' && now < a.expiresAt && mayDecide(a, user),
    );
    writePage(
      res,
      200,
      accountPage({
        who: user.email ?? user.subject,
        csrf: csrfOf(value),
        base: this.#ctx.publicUrl(),
        grants,
        hosts,
        consents,
        names,
        connections,
        waiting,
        notice,
      }),
    );
  }
}

/** host[:port] of a redirect URI (what the consent page shows); the text itself when it is no URL. */
function hostOf(uri: string): string {
  try {
    return new URL(uri).host;
  } catch {
    return uri;
  }
}

interface AccountView {
  who: string;
  csrf: string;
  base: string;
  grants: Grant[];
  /** Client id -> the hosts its codes go to. */
  hosts: Map<string, string>;
  consents: SubjectConsent[];
  /** Client id -> its name, when it has one. */
  names: Map<string, string | undefined>;
  /** Kept upstream credentials of this person (identity and times only: `sealed` is never shown). */
  connections: StoredUpstreamCredential[];
  /** Held calls this person may approve. */
  waiting: Pick<ApprovalRecord, 'approvalId' | 'tool' | 'subject' | 'expiresAt'>[];
  notice: string | undefined;
}

function time(ms: number | null): string {
  return ms === null
    ? 'never recorded'
    : new Date(ms)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z')
        .replace('T', ' ');
}

function clientLabel(name: string | null | undefined, clientId: string | null): string {
  if (clientId === null) return 'A token exchanged from your identity provider (no application)';
  const shown = name ? `<bdi>${escapeHtml(displayableName(name))}</bdi>` : 'Unnamed application';
  return `${shown}<br><span class="note mono">${escapeHtml(clientId)}</span>`;
}

/** What a kept credential is, in words: `oauth:github` is "github", `exchange:<audience>` names its audience. */
function connectionLabel(provider: string): string {
  if (provider === 'idp') return "Your identity provider's token";
  if (provider.startsWith('oauth:')) return `<bdi>${escapeHtml(provider.slice('oauth:'.length))}</bdi>`;
  if (provider.startsWith('exchange:')) return `A token exchanged for <bdi>${escapeHtml(provider.slice('exchange:'.length))}</bdi>`;
  return `<bdi>${escapeHtml(provider)}</bdi>`;
}

/** The account page: every grant and approval with its button; a form per row, so no script is needed. */
export function accountPage(view: AccountView): string {
  const hidden = `<input type="hidden" name="csrf" value="${escapeHtml(view.csrf)}">`;
  const grantRows = view.grants.map((g) => {
    const label = `Revoke ${g.clientId === null ? 'exchanged token' : (g.clientName ?? g.clientId)}`;
    return `<tr><td>${clientLabel(g.clientName, g.clientId)}</td><td class="mono">${escapeHtml(g.clientId === null ? '—' : (view.hosts.get(g.clientId) ?? ''))}</td><td>${g.scope ? escapeHtml(g.scope) : 'all it may'}</td><td>${time(g.createdAt)}</td><td>${time(g.lastUsedAt)}</td>
<td><form method="post" action="${escapeHtml(view.base)}/account/revoke">${hidden}<input type="hidden" name="grant" value="${escapeHtml(g.grantId)}"><button type="submit" aria-label="${escapeHtml(label)}">Revoke</button></form></td></tr>`;
  });
  const consentRows = view.consents.map((c) => {
    const name = view.names.get(c.clientId);
    const label = `Forget approval of ${name ?? c.clientId}`;
    return `<tr><td>${clientLabel(name, c.clientId)}</td><td class="mono">${escapeHtml(hostOf(c.redirectUri))}</td><td>${c.scope ? escapeHtml(c.scope) : 'all it may'}</td><td>${time(c.approvedAt)}</td><td>${time(c.expiresAt)}</td>
<td><form method="post" action="${escapeHtml(view.base)}/account/forget">${hidden}<input type="hidden" name="consent" value="${consentIdOf(c)}"><button type="submit" aria-label="${escapeHtml(label)}">Revoke</button></form></td></tr>`;
  });
  const connectionRows = view.connections.map((c) => {
    const label = `Disconnect ${c.provider}`;
    return `<tr><td>${connectionLabel(c.provider)}<br><span class="note mono">${escapeHtml(c.provider)}</span></td><td>${time(c.createdAt)}</td>
<td><form method="post" action="${escapeHtml(view.base)}/account/disconnect">${hidden}<input type="hidden" name="connection" value="${connectionIdOf(c)}"><button type="submit" aria-label="${escapeHtml(label)}">Disconnect</button></form></td></tr>`;
  });
  const grants =
    grantRows.length === 0
      ? '<p>No application holds access for you.</p>'
      : `<table><caption class="note">Applications that can use the MCP server as you</caption><thead><tr><th scope="col">Application</th><th scope="col">Sends codes to</th><th scope="col">Access</th><th scope="col">Granted</th><th scope="col">Last used</th><th scope="col"><span class="note">Action</span></th></tr></thead><tbody>${grantRows.join('\n')}</tbody></table>`;
  const consents =
    consentRows.length === 0
      ? '<p>No approval is remembered.</p>'
      : `<table><caption class="note">Approvals remembered in your browsers: these applications sign you in without asking</caption><thead><tr><th scope="col">Application</th><th scope="col">Sends codes to</th><th scope="col">Access</th><th scope="col">Approved</th><th scope="col">Until</th><th scope="col"><span class="note">Action</span></th></tr></thead><tbody>${consentRows.join('\n')}</tbody></table>`;
  const connections =
    connectionRows.length === 0
      ? '<p>No account is connected.</p>'
      : `<table><caption class="note">Accounts the MCP server uses for you (their tokens are kept encrypted and never shown)</caption><thead><tr><th scope="col">Account</th><th scope="col">Connected</th><th scope="col"><span class="note">Action</span></th></tr></thead><tbody>${connectionRows.join('\n')}</tbody></table>`;
  const waiting =
    view.waiting.length === 0
      ? '<p>No call waits for your approval.</p>'
      : `<ul>${view.waiting.map((a) => `<li><a href="${escapeHtml(view.base)}/approve/${escapeHtml(a.approvalId)}"><code>${escapeHtml(a.tool)}</code></a> for ${escapeHtml(a.subject)}, until ${time(a.expiresAt)}</li>`).join('\n')}</ul>`;
  return page(
    'Your MCP access',
    `<style>body{max-width:60rem}</style><h1>Your MCP access</h1>
<p>Signed in as <strong>${escapeHtml(view.who)}</strong>. Times are UTC; “last used” is recorded to the minute.</p>
${view.notice !== undefined ? `<p role="status"><strong>${escapeHtml(view.notice)}</strong></p>` : ''}
<h2>Applications</h2>
${grants}
<h2>Remembered approvals</h2>
${consents}
<h2>Connected accounts</h2>
${connections}
<h2>Calls waiting for your approval</h2>
${waiting}
<form method="post" action="${escapeHtml(view.base)}/account/sign-out">${hidden}<button type="submit">Sign out</button></form>`,
  );
}
