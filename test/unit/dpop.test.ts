// The DPoP proof check (RFC 9449 §4.3) without a listener: each rule a proof must meet, the `jti` spent
// once in a real (memory) store, htu normalisation and the server nonces. Proofs are made as the
// MCP SDK's 2.x client makes them (test/support/dpop.ts).

import { beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import {
  accessTokenHash,
  dpopHeader,
  DpopNonces,
  DpopProofError,
  DpopVerifier,
  namesOneOf,
  type DpopRefusal,
  type ProofTarget,
} from '../../src/oauth/dpop.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';
import { DpopKey, hmacProof, unsignedProof } from '../support/dpop.ts';

const URL_MCP = 'https://mcp.example.com/mcp';
const TOKEN = 'a3f1'.repeat(16);
const MASTER = 'b7c2'.repeat(16);

async function refusal(promise: Promise<unknown>): Promise<DpopRefusal | 'accepted'> {
  try {
    await promise;
    return 'accepted';
  } catch (err) {
    if (err instanceof DpopProofError) return err.reason;
    throw err;
  }
}

describe('DpopVerifier.check', () => {
  let clock: ManualClock;
  let verifier: DpopVerifier;
  let key: DpopKey;
  const target: ProofTarget = { method: 'POST', urls: [URL_MCP], accessToken: TOKEN };
  const nowSeconds = () => Math.floor(clock.now() / 1000);

  beforeEach(async () => {
    clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
    verifier = new DpopVerifier({ store: new MemoryTokenStore({ clock }), clock, windowSeconds: 60 });
    key ??= await DpopKey.generate('ES256');
  });

  it('accepts a proof for this request and returns its key thumbprint (RFC 7638)', async () => {
    const proof = await key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() });
    const checked = await verifier.check(proof, target);
    expect(checked.jkt).toBe(await key.thumbprint());
    expect(checked.jkt).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it.each(['RS256', 'PS256', 'EdDSA'])('accepts %s proofs', async (alg) => {
    const other = await DpopKey.generate(alg);
    const proof = await other.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() });
    expect((await verifier.check(proof, target)).jkt).toBe(await other.thumbprint());
  });

  it('ignores the query and fragment of htu, and normalises case, default port, dot segments and percent-encoding', async () => {
    for (const htu of [
      `${URL_MCP}?a=1`,
      `${URL_MCP}#x`,
      'HTTPS://MCP.Example.COM:443/mcp',
      'https://mcp.example.com/x/../mcp',
      'https://mcp.example.com/%6Dcp',
    ]) {
      const proof = await key.proof({ htm: 'POST', htu, accessToken: TOKEN, iat: nowSeconds() });
      expect(await refusal(verifier.check(proof, target)), htu).toBe('accepted');
    }
    expect(namesOneOf('https://mcp.example.com/a%2fb', ['https://mcp.example.com/a%2Fb'])).toBe(true);
    expect(namesOneOf('https://mcp.example.com/a%2Fb', ['https://mcp.example.com/a/b'])).toBe(false);
  });

  const refusals: Array<[string, DpopRefusal, () => Promise<string>]> = [
    ['typ is not dpop+jwt', 'typ', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN }, { typ: 'JWT' })],
    ['alg none', 'algorithm', async () => unsignedProof(key.publicJwk, { htm: 'POST', htu: URL_MCP, ath: accessTokenHash(TOKEN) })],
    ['HS256 under a symmetric key', 'algorithm', () => hmacProof({ htm: 'POST', htu: URL_MCP, ath: accessTokenHash(TOKEN) })],
    [
      'the header states a private key',
      'key',
      async () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN }, { jwk: await key.privateJwk() }),
    ],
    [
      'signed by another key than the header states',
      'signature',
      async () => (await DpopKey.generate('ES256')).proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN }, { jwk: key.publicJwk }),
    ],
    ['not a JWS', 'malformed', async () => 'not-a-proof'],
    ['another method', 'htm', () => key.proof({ htm: 'GET', htu: URL_MCP, accessToken: TOKEN })],
    ['the method in lower case', 'htm', () => key.proof({ htm: 'post', htu: URL_MCP, accessToken: TOKEN })],
    ['another URL', 'htu', () => key.proof({ htm: 'POST', htu: 'https://mcp.example.com/other', accessToken: TOKEN })],
    ['another host', 'htu', () => key.proof({ htm: 'POST', htu: 'https://evil.example/mcp', accessToken: TOKEN })],
    ['another scheme', 'htu', () => key.proof({ htm: 'POST', htu: 'http://mcp.example.com/mcp', accessToken: TOKEN })],
    ['a relative htu', 'htu', () => key.proof({ htm: 'POST', htu: '/mcp', accessToken: TOKEN })],
    ['no ath', 'ath', () => key.proof({ htm: 'POST', htu: URL_MCP })],
    ['the ath of another token', 'ath', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: 'c0de'.repeat(16) })],
    ['no jti', 'signature', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN }, { omit: ['jti'] })],
    ['a jti longer than 256 characters', 'jti', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, jti: 'j'.repeat(257) })],
    ['no iat', 'signature', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN }, { omit: ['iat'] })],
    ['iat more than the window ago', 'iat', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() - 61 })],
    ['iat more than the window ahead', 'iat', () => key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() + 61 })],
  ];

  it.each(refusals)('refuses a proof whose %s (%s)', async (_label, reason, make) => {
    expect(await refusal(verifier.check(await make(), target))).toBe(reason);
  });

  it('accepts iat anywhere within the window, either way', async () => {
    for (const iat of [nowSeconds() - 60, nowSeconds() + 60]) {
      expect(await refusal(verifier.check(await key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat }), target))).toBe(
        'accepted',
      );
    }
  });

  it('at /token (no access token) ath is not asked for', async () => {
    const proof = await key.proof({ htm: 'POST', htu: 'https://mcp.example.com/token', iat: nowSeconds() });
    expect(await refusal(verifier.check(proof, { method: 'POST', urls: ['https://mcp.example.com/token'] }))).toBe('accepted');
  });

  it('spends a jti once: the same proof again is refused, another proof of the same key is not', async () => {
    const proof = await key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() });
    expect(await verifier.spend(await verifier.check(proof, target))).toBe(true);
    expect(await verifier.spend(await verifier.check(proof, target))).toBe(false);
    const next = await key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() });
    expect(await verifier.spend(await verifier.check(next, target))).toBe(true);
  });

  it('remembers a jti until its proof could no longer be accepted (twice the window after iat)', async () => {
    const proof = await key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN, iat: nowSeconds() });
    const checked = await verifier.check(proof, target);
    expect(await verifier.spend(checked)).toBe(true);
    clock.advance(119_000);
    expect(await verifier.spend(checked)).toBe(false);
  });
});

describe('server nonces', () => {
  it("a nonce of the current or previous slot is accepted; older ones and another master token's are not", () => {
    const nonces = new DpopNonces(MASTER, 60);
    const t = 1_800_000_000_000;
    const nonce = nonces.current(t);
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(nonces.accepts(nonce, t)).toBe(true);
    expect(nonces.accepts(nonce, t + 60_000)).toBe(true);
    expect(nonces.accepts(nonce, t + 120_000)).toBe(false);
    expect(new DpopNonces(MASTER, 60).accepts(nonce, t)).toBe(true);
    expect(new DpopNonces('c0de'.repeat(16), 60).accepts(nonce, t)).toBe(false);
    expect(nonces.accepts('', t)).toBe(false);
  });

  it('a proof without the nonce, or with a stale one, is refused (nonce)', async () => {
    const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000);
    const nonces = new DpopNonces(MASTER, 60);
    const verifier = new DpopVerifier({ store: new MemoryTokenStore({ clock }), clock, windowSeconds: 60, nonces });
    const key = await DpopKey.generate();
    const iat = Math.floor(clock.now() / 1000);
    const target = { method: 'POST', urls: [URL_MCP] };
    expect(await refusal(verifier.check(await key.proof({ htm: 'POST', htu: URL_MCP, iat }), target))).toBe('nonce');
    expect(
      await refusal(
        verifier.check(await key.proof({ htm: 'POST', htu: URL_MCP, iat, nonce: nonces.current(clock.now() - 120_000) }), target),
      ),
    ).toBe('nonce');
    expect(
      await refusal(verifier.check(await key.proof({ htm: 'POST', htu: URL_MCP, iat, nonce: nonces.current(clock.now()) }), target)),
    ).toBe('accepted');
  });
});

describe('dpopHeader', () => {
  it('one DPoP header is the proof; none is missing; two, an empty one or an oversized one are malformed', () => {
    expect(dpopHeader(['DPoP', 'a.b.c'])).toEqual({ kind: 'proof', proof: 'a.b.c' });
    expect(dpopHeader(['dpop', 'a.b.c', 'Host', 'x'])).toEqual({ kind: 'proof', proof: 'a.b.c' });
    expect(dpopHeader(['Host', 'x'])).toEqual({ kind: 'missing' });
    expect(dpopHeader(['DPoP', 'a.b.c', 'DPoP', 'a.b.c'])).toEqual({ kind: 'malformed' });
    expect(dpopHeader(['DPoP', ''])).toEqual({ kind: 'malformed' });
    expect(dpopHeader(['DPoP', 'x'.repeat(4097)])).toEqual({ kind: 'malformed' });
  });
});
