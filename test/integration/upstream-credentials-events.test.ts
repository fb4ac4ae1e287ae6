// The audit events and metrics of kept upstream credentials over real HTTP (mode idp, the in-process
// OpenID provider as the IdP, real Redis): a refresh the IdP refuses ends the credential (audited as
// upstream_credential_disconnected with the subject and provider, counted as refused, the user asked
// to sign in again); offboarding (revokeSubject) names the providers whose credentials it deleted.
// Never a token in an audit event, a log line or a metric.

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../../src/model/credentials.ts';
import { CredentialCipher } from '../../src/upstream-credentials/cipher.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { startEchoUpstream, type FakeUpstream } from '../support/fake-upstreams.ts';
import { startSignInStack, type SignInStack } from '../support/sign-in.ts';

const KEY = randomBytes(32).toString('hex');
let s: SignInStack;
let echo: FakeUpstream;
let vault: CredentialVault;

/** A user-grade token for a fresh subject. */
async function userToken(subject: string): Promise<string> {
  const raw = generateToken();
  const now = s.stack.clock.now();
  await s.stack.store.putUserToken({
    tokenHash: hashToken(raw),
    subject,
    issuer: s.idp.issuer,
    createdAt: now,
    expiresAt: now + 3_600_000,
  });
  return raw;
}

function call(token: string) {
  return fetch(`${s.base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: {} } }),
  });
}

async function refreshes(result: string): Promise<number> {
  const text = await (await fetch(`${s.stack.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`mcp_auth_upstream_credential_refreshes_total{result="${result}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

beforeAll(async () => {
  echo = await startEchoUpstream();
  s = await startSignInStack({ upstreamUrl: echo.url, config: { upstream: { credentials: { mode: 'idp', key: KEY } } } });
  vault = new CredentialVault({ store: s.stack.store, cipher: new CredentialCipher(Buffer.from(KEY, 'hex')), clock: s.stack.clock });
});
afterAll(async () => {
  await s?.close();
  await echo?.close();
});

describe('upstream credential events', () => {
  it('a refresh the IdP refuses: audited as disconnected by subject and provider, counted refused; the user is asked to sign in again', async () => {
    const subject = `refused-${randomBytes(4).toString('hex')}`;
    const token = await userToken(subject);
    const access = `expired-access-${randomBytes(12).toString('hex')}`;
    const refresh = `unknown-refresh-${randomBytes(12).toString('hex')}`;
    await vault.save(
      { subject, issuer: s.idp.issuer, provider: 'idp' },
      { accessToken: access, refreshToken: refresh, expiresAt: s.stack.clock.now() - 1000 },
    );
    const refusedBefore = await refreshes('refused');
    const before = echo.seen.length;

    const res = await call(token);
    expect(res.status).toBe(200);
    // A client that declared no URL elicitation (none here: no session): the link in a tool error.
    const answer = (await res.json()) as { result: { isError: boolean; content: Array<{ text: string }> } };
    expect(answer.result.isError).toBe(true);
    expect(answer.result.content[0]!.text).toContain(`${s.base}/connect/`);
    expect(echo.seen.length).toBe(before);

    expect(await refreshes('refused')).toBe(refusedBefore + 1);
    const events = (await s.stack.store.listAuditEvents(100)).filter((e) => e.subject === subject);
    expect(events).toContainEqual(
      expect.objectContaining({
        who: 'user',
        action: 'upstream_credential_disconnected',
        detail: { provider: 'idp', reason: 'refresh_refused' },
      }),
    );
    const everything = [JSON.stringify(events), s.stack.logs.join('\n'), await (await fetch(`${s.stack.adminUrl}/metrics`)).text()].join(
      '\n',
    );
    expect(everything).not.toContain(access);
    expect(everything).not.toContain(refresh);
  });

  it('revokeSubject: the audit event names the providers whose credentials it deleted, never a token', async () => {
    const subject = `offboarded-${randomBytes(4).toString('hex')}`;
    const tokens = [`idp-access-${randomBytes(12).toString('hex')}`, `github-access-${randomBytes(12).toString('hex')}`];
    await vault.save({ subject, issuer: s.idp.issuer, provider: 'idp' }, { accessToken: tokens[0]! });
    await vault.save({ subject, issuer: s.idp.issuer, provider: 'oauth:github.com' }, { accessToken: tokens[1]! });

    const revoked = await s.stack.admin('revokeSubject', { subject });
    expect(revoked.status).toBe(200);
    expect(revoked.body.connectedAccountsDeleted).toBe(2);
    const event = (await s.stack.store.listAuditEvents(100)).find((e) => e.action === 'revokeSubject' && e.subject === subject);
    expect(event?.detail).toMatchObject({ connectedAccountsDeleted: 2, upstreamCredentialsDisconnected: 'idp oauth:github.com' });
    for (const t of tokens) expect(JSON.stringify(event)).not.toContain(t);

    // Nothing kept, nothing named.
    const again = await s.stack.admin('revokeSubject', { subject });
    expect(again.body.connectedAccountsDeleted).toBe(0);
    const events = (await s.stack.store.listAuditEvents(100)).filter((e) => e.action === 'revokeSubject' && e.subject === subject);
    expect(events[0]!.detail).not.toHaveProperty('upstreamCredentialsDisconnected');
  });
});
