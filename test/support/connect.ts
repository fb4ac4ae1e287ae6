// The connect pages (mode oauth) as a person goes through them with the fetch-based user agent: the
// link, the IdP sign-in when the browser has no account-page session, the confirm page, Connect.

import { ACCOUNT_SESSION_TTL_MS } from '../../src/oauth/account.ts';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import type { Stack } from './stack.ts';
import type { Hop, UserAgent } from './user-agent.ts';

/** The confirm page's form: where it posts and its CSRF token. */
export function confirmForm(hop: Hop): { action: string; csrf: string } {
  const action = /<form method="post" action="([^"]+)"/.exec(hop.body);
  const csrf = /name="csrf" value="([0-9a-f]{64})"/.exec(hop.body);
  if (!action || !csrf) throw new Error(`no confirm form: ${hop.status} ${hop.body.slice(0, 300)}`);
  return { action: action[1]!.replace(/&amp;/g, '&'), csrf: csrf[1]! };
}

/**
 * Opens `url` (signing in at the IdP when the browser has no session), confirms on the confirm page,
 * and follows on to the provider and back: the last hop, or the one redirecting to `stopAt`.
 */
export async function openAndConfirm(agent: UserAgent, url: string, stopAt?: string): Promise<Hop> {
  const confirm = await agent.follow(await agent.request(url));
  if (confirm.status !== 200) throw new Error(`connect page: ${confirm.status} ${confirm.body.slice(0, 300)}`);
  const { action, csrf } = confirmForm(confirm);
  return agent.follow(await agent.request(action, { form: { csrf } }), stopAt);
}

/**
 * An account-page session for `user` in `agent` (what signing in at the IdP leaves behind), for people
 * the demo IdP cannot sign in as (it knows one user).
 */
export async function seedAccountSession(stack: Stack, base: string, agent: UserAgent, user: { subject: string; issuer: string }) {
  const value = generateToken();
  const now = stack.clock.now();
  await stack.store.putAccountSession(hashToken(value), { user, createdAt: now, expiresAt: now + ACCOUNT_SESSION_TTL_MS });
  const host = new URL(base).host;
  if (!agent.jar.has(host)) agent.jar.set(host, new Map());
  agent.jar.get(host)!.set(base.startsWith('https:') ? '__Host-mcp-account' : 'mcp-account', value);
}
