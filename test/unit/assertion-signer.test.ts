// The assertion cache (src/assertion/signer.ts): one signing per principal while more than half the
// assertion's life is left, concurrent requests sharing it, bounded, never shared between principals.

import { describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { ManualClock } from '../../src/model/clock.ts';
import type { Principal } from '../../src/model/credentials.ts';
import { generateSigningKey, type SigningKey } from '../../src/assertion/keys.ts';
import { AssertionSigner } from '../../src/assertion/signer.ts';

async function signer(maxEntries = 10) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  let key: SigningKey = await generateSigningKey();
  const s = new AssertionSigner({
    keys: { current: () => key },
    clock,
    issuer: () => 'https://mcp.example.com',
    audience: 'http://upstream:3000',
    lifetimeSeconds: 60,
    maxEntries,
  });
  return { s, clock, rotate: async () => void (key = await generateSigningKey()) };
}

const alice: Principal = { kind: 'oauth', subject: 'alice', clientId: 'c1', scope: 'read' };

describe('AssertionSigner', () => {
  it('concurrent requests of one principal share one signing; a cached one is returned synchronously', async () => {
    const { s } = await signer();
    const [a, b] = [s.assertionFor(alice), s.assertionFor({ ...alice })];
    expect(a).toBeInstanceOf(Promise);
    expect(await a).toBe(await b);
    expect(s.assertionFor(alice)).toBe(await a);
  });

  it.each<[string, Partial<Principal>]>([
    ['kind', { kind: 'user' }],
    ['subject', { subject: 'bob' }],
    ['client', { clientId: 'c2' }],
    ['scope', { scope: 'read write' }],
    ['groups', { groups: ['admins'] }],
    ['email', { email: 'alice@example.com' }],
    ['issuer', { issuer: 'https://fabrikam.okta.com/oauth2/default' }],
  ])('a principal differing only in its %s gets its own assertion', async (_name, change) => {
    const { s } = await signer();
    const first = await s.assertionFor(alice);
    const other = await s.assertionFor({ ...alice, ...change });
    expect(other).not.toBe(first);
    expect(decodeJwt(other)).toMatchObject(
      change.subject
        ? { sub: change.subject }
        : change.kind
          ? { mcp_kind: change.kind }
          : change.clientId
            ? { client_id: change.clientId }
            : change.issuer
              ? { mcp_issuer: change.issuer, iss: 'https://mcp.example.com' }
              : change,
    );
  });

  it('signed anew at half its life, and after a key rotation', async () => {
    const { s, clock, rotate } = await signer();
    const first = await s.assertionFor(alice);
    clock.advance(29_999);
    expect(s.assertionFor(alice)).toBe(first);
    clock.advance(1);
    const second = await s.assertionFor(alice);
    expect(second).not.toBe(first);
    await rotate();
    expect(await s.assertionFor(alice)).not.toBe(second);
  });

  it('holds at most maxEntries principals, dropping the least recently signed', async () => {
    const { s } = await signer(3);
    const first = await s.assertionFor({ kind: 'oauth', subject: 'p0' });
    for (let i = 1; i < 4; i++) await s.assertionFor({ kind: 'oauth', subject: `p${i}` });
    expect(s.size).toBe(3);
    expect(await s.assertionFor({ kind: 'oauth', subject: 'p0' })).not.toBe(first);
    expect(s.size).toBe(3);
  });
});
