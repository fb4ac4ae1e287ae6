// The HTML the browser sees during sign-in: the consent page, the device-code page and the provider
// chooser, in the frame of web/pages.ts.

import { displayableName } from '../model/clients.ts';
import { escapeHtml, page } from '../web/pages.ts';

export interface ConsentView {
  /** The client's own name (unverified: shown as such), and its client_id. */
  clientName: string | undefined;
  clientId: string;
  /** host[:port] the authorization code will be sent to (empty for a device). */
  redirectHost: string;
  /** A device (RFC 8628) is being signed in: no redirect, the tokens go to whoever holds its device code. */
  device?: boolean;
  /** Where the client's metadata comes from, for a Client ID Metadata Document. */
  metadataHost?: string;
  scopes: string[];
  /** Scopes the client asked for that this server does not define: named as ignored, never as access. */
  ignoredScopes?: string[];
  /** Host of the identity provider the user signs in at next. */
  idpHost: string;
  /** The pending request's handle (the form's anti-CSRF token). */
  requestId: string;
  /** Absolute URL the form posts to (PUBLIC_URL/authorize/consent). */
  action: string;
  /** Offer to remember the approval in this browser for this many days (checked); absent: never remembered. */
  rememberDays?: number;
  /** Shown after the IdP sign-in: who the user is there (the approval will be that account's). */
  signedInAs?: string;
}

export function consentPage(view: ConsentView): string {
  // The name is the client's own claim: format characters shown as U+FFFD, and the name isolated
  // (<bdi>) so right-to-left text in it cannot reorder the sentence around it.
  const name = view.clientName ? `“<bdi>${escapeHtml(displayableName(view.clientName))}</bdi>”` : 'An application';
  const scopes =
    view.scopes.length > 0
      ? view.scopes.map((s) => `<code>${escapeHtml(s)}</code>`).join(' ')
      : 'access to the MCP server (no narrower scope asked)';
  const ignored =
    view.ignoredScopes !== undefined && view.ignoredScopes.length > 0
      ? `<p class="note">Also asked for, not defined by this server and not granted: ${escapeHtml(view.ignoredScopes.join(', '))}.</p>`
      : '';
  const next =
    view.signedInAs !== undefined
      ? `You are signed in at <span class="mono">${escapeHtml(view.idpHost)}</span> as <strong>${escapeHtml(view.signedInAs)}</strong>; this account has not approved this application in this browser.`
      : `You will then sign in at <span class="mono">${escapeHtml(view.idpHost)}</span>.`;
  const remember =
    view.rememberDays !== undefined
      ? `\n<p><label><input type="checkbox" name="remember" value="yes" checked> Remember this approval in this browser for ${view.rememberDays} day${view.rememberDays === 1 ? '' : 's'}: signing in again from this application, to the same address and with no more access, will not ask again.</label></p>`
      : '';
  const destination = view.device
    ? '<dt>Signs in</dt><dd>a device: the one that showed you the code you entered</dd>'
    : `<dt>Sends you back to</dt><dd class="mono">${escapeHtml(view.redirectHost)}</dd>`;
  // A device code can be phished: whoever sends a victim a code of their own gets the victim's tokens.
  const warning = view.device
    ? `<p class="note"><strong>Approve only a code you started yourself, on a device you control.</strong> If someone sent you this code,
or asked you to enter it, deny: approving signs THEM in as you. The application's name is its own claim.`
    : `<p class="note">The application's name is its own claim. Approve only if you started this sign-in and recognise
where it sends you back to.`;
  const metadata = view.metadataHost ? `<dt>Described by</dt><dd class="mono">${escapeHtml(view.metadataHost)}</dd>` : '';
  return page(
    'Allow access to the MCP server?',
    `<h1>${name} wants to use the MCP server as you</h1>
<dl>
<dt>Client id</dt><dd class="mono">${escapeHtml(view.clientId)}</dd>${metadata}
${destination}
<dt>Access</dt><dd>${scopes}</dd>
</dl>${ignored}
${warning} ${next}</p>
<form method="post" action="${escapeHtml(view.action)}">
<input type="hidden" name="request" value="${escapeHtml(view.requestId)}">${remember}
<div class="actions"><button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button></div>
</form>`,
  );
}

export interface DeviceCodeView {
  /** Absolute URL the form posts to (PUBLIC_URL/device). */
  action: string;
  /** The code to prefill (from verification_uri_complete), as typed; empty for none. */
  userCode: string;
  /** Why the last entry was refused. */
  error?: string;
  /** The provider chosen (several configured), kept by the form; and the e-mail that chose it. */
  provider?: string;
  loginHint?: string;
}

/** The form where the user types the code their device shows (RFC 8628 §3.3). */
export function deviceCodePage(view: DeviceCodeView): string {
  const error = view.error !== undefined ? `<p><strong>${escapeHtml(view.error)}</strong></p>` : '';
  return page(
    'Sign in a device',
    `<h1>Sign in a device</h1>${error}
<p>Enter the code your device (a terminal, a server, an application without a browser) shows you.</p>
<form method="post" action="${escapeHtml(view.action)}">${view.provider !== undefined ? `\n<input type="hidden" name="idp" value="${escapeHtml(view.provider)}">` : ''}${view.loginHint !== undefined ? `\n<input type="hidden" name="login_hint" value="${escapeHtml(view.loginHint)}">` : ''}
<p><input name="user_code" value="${escapeHtml(view.userCode)}" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="20" size="12" class="mono" aria-label="Code"></p>
<div class="actions"><button type="submit">Continue</button></div>
</form>
<p class="note">Only enter a code you started yourself. Never enter a code someone else sent you.</p>`,
  );
}

export interface ProviderChooserView {
  /** Each provider offered: its name, the host of its issuer, and the link that signs in there. */
  providers: ReadonlyArray<{ name: string; host: string; href: string }>;
  /** The e-mail form (home-realm discovery): the URL it is sent to (GET) and the fields it keeps. */
  email: { action: string; hidden: ReadonlyArray<[string, string]> } | undefined;
  /** Why the last choice was not taken (an e-mail domain no provider has). */
  error?: string;
}

/**
 * Which identity provider to sign in at: a link per provider, and an e-mail field whose domain may
 * choose one. Links and the form only start a sign-in (GET, as /authorize itself is), which the
 * browser binding and the IdP's state protect as any other.
 */
export function providerChooserPage(view: ProviderChooserView): string {
  const error = view.error !== undefined ? `<p><strong>${escapeHtml(view.error)}</strong></p>` : '';
  const links = view.providers
    .map((p) => `<li><a href="${escapeHtml(p.href)}">${escapeHtml(p.name)}</a> <span class="note mono">${escapeHtml(p.host)}</span></li>`)
    .join('\n');
  const email =
    view.email === undefined
      ? ''
      : `<form method="get" action="${escapeHtml(view.email.action)}">
${view.email.hidden.map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`).join('\n')}
<p><label>Or your work e-mail: <input type="email" name="login_hint" maxlength="320" autocomplete="email"></label>
<button type="submit">Continue</button></p>
</form>`;
  return page('Choose how to sign in', `<h1>Choose how to sign in</h1>${error}\n<ul>\n${links}\n</ul>\n${email}`);
}
