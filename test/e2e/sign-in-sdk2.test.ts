// The MCP TypeScript SDK's 2.x client (@modelcontextprotocol/client) against the sidecar, beside the
// 1.x tests (sign-in-sdk.test.ts): browser sign-in through a real OpenID provider (401, discovery,
// DCR, /authorize, consent, IdP, code, tokens) then tools through the sidecar to the reference
// upstream, with Bearer tokens and with DPoP on (the SDK's DpopSession signs its token requests and
// each request to /mcp; the sidecar binds the tokens to its key and checks every proof).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/model/credentials.ts';
import { DEMO_USER } from '../../demo/idp.ts';
import { initializeRequest } from '../support/http.ts';
import { approveAndSignIn, clientReceived, startSignInStack, type SignInStack } from '../support/sign-in.ts';
import { connectedClient2, firstConnection2, RecordingProvider2 } from '../support/sdk2-oauth.ts';
import { UserAgent } from '../support/user-agent.ts';
import { readable } from '../support/records.ts';

function textOf(result: object): string {
  return ((result as { content: Array<{ text?: string }> }).content[0]?.text ?? '') as string;
}

/** Signs the provider's client in through the browser flow and returns a connected 2.x client. */
async function signedIn(s: SignInStack, provider: RecordingProvider2) {
  const { transport, authorizationUrl } = await firstConnection2(s.base, provider);
  expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authorizationUrl.searchParams.get('resource')).toBe(`${s.base}/mcp`);
  const hop = await approveAndSignIn(new UserAgent(), s.base, authorizationUrl.href);
  // The whole redirect: the 2.x client checks its `iss` (RFC 9207) before it redeems the code.
  const received = clientReceived(hop);
  expect(received.get('iss')).toBe(s.base);
  await transport.finishAuth(received);
  return connectedClient2(s.base, provider);
}

describe('the SDK 2.x client', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('signs in without DPoP and calls tools with a Bearer token, as the IdP user', async () => {
    const provider = new RecordingProvider2();
    const client = await signedIn(s, provider);
    expect(provider.tokens()?.token_type).toBe('Bearer');
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('headers');
    const seen = JSON.parse(textOf(await client.callTool({ name: 'headers', arguments: {} }))) as Record<string, string>;
    expect(seen['x-mcp-auth-kind']).toBe('oauth');
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    expect(seen['x-mcp-auth-client-id']).toBe(provider.clientInformation()?.client_id);
    await client.close();
  });

  it("with DPoP: the tokens are bound to the SDK's key, tools are called with proofs, and the stolen token alone is refused", async () => {
    const provider = new RecordingProvider2({ dpop: true });
    const client = await signedIn(s, provider);
    const tokens = provider.tokens()!;
    expect(tokens.token_type).toBe('DPoP');
    const session = (await provider.dpop())!;
    const record = await s.stack.store.lookupToken(hashToken(tokens.access_token));
    expect(readable(record.oauth)?.dpopJkt).toBe(session.thumbprint);

    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'bound' } }))).toBe('bound');
    const seen = JSON.parse(textOf(await client.callTool({ name: 'headers', arguments: {} }))) as Record<string, string>;
    expect(seen['x-mcp-auth-subject']).toBe(DEMO_USER.sub);
    // The proof and the token are the sidecar's: neither reaches the MCP server.
    expect(seen.dpop).toBeUndefined();
    expect(seen.authorization).toBeUndefined();

    // The same access token without the key: as Bearer, and as DPoP without a proof.
    for (const authorization of [`Bearer ${tokens.access_token}`, `DPoP ${tokens.access_token}`]) {
      const res = await fetch(`${s.base}/mcp`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(initializeRequest()),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(
        /^DPoP realm="mcp", .*error="invalid_(token|dpop_proof)".*algs="ES256 RS256 PS256 EdDSA"$/,
      );
    }
    await client.close();
  });
});

describe('the SDK 2.x client with server nonces (oauth.dpopNonce: true)', () => {
  let s: SignInStack;
  beforeAll(async () => {
    s = await startSignInStack({ config: { oauth: { dpopNonce: true } } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('answers use_dpop_nonce at /token by signing again with the DPoP-Nonce it was given, and signs its /mcp proofs with it', async () => {
    const provider = new RecordingProvider2({ dpop: true });
    const client = await signedIn(s, provider);
    expect(provider.tokens()?.token_type).toBe('DPoP');
    // The sidecar asked for a nonce at /token (its refusal is audited); the SDK keeps the nonce per
    // origin, and the sidecar's nonces hold at /token and /mcp alike, so its /mcp proofs carry it.
    const lines = s.stack.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.some((l) => (l.audit as { result?: string } | undefined)?.result === 'use_dpop_nonce')).toBe(true);
    expect(textOf(await client.callTool({ name: 'echo', arguments: { text: 'with a nonce' } }))).toBe('with a nonce');
    await client.close();
  });
});
