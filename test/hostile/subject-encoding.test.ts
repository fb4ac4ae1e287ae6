// X-MCP-Auth-Subject is unambiguous: `ü` and the literal text `%C3%BC` are two subjects and must reach
// the upstream as two values, each decoding (decodeURIComponent) to exactly its subject. Plain
// printable-ASCII subjects without `%` pass as they are.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeUpstream } from '../support/fake-upstreams.ts';
import { startEchoStack, type Stack } from '../support/stack.ts';
import { storeUserToken } from '../support/user-tokens.ts';

describe('identity header encoding', () => {
  let echo: FakeUpstream;
  let stack: Stack;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ echo, stack, close } = await startEchoStack());
  });
  afterAll(() => close());

  async function subjectSeen(subject: string): Promise<string> {
    const token = await storeUserToken(stack, subject);
    const res = await fetch(stack.mcpUrl, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
    expect(res.status).toBe(200);
    await res.text();
    return String(echo.seen.at(-1)!.headers['x-mcp-auth-subject']);
  }

  it('ü and the literal %C3%BC reach the upstream as different values, each decoding to its subject', async () => {
    const umlaut = await subjectSeen('ü');
    const literal = await subjectSeen('%C3%BC');
    expect(umlaut).not.toBe(literal);
    expect(decodeURIComponent(umlaut)).toBe('ü');
    expect(decodeURIComponent(literal)).toBe('%C3%BC');
  });

  it.each([
    ['auth0|abc123', 'auth0|abc123'],
    ['user@example.com', 'user@example.com'],
    ['100%', '100%25'],
    [' padded ', '%20padded%20'],
    ['a b', 'a b'],
    ['line\r\nbreak', 'line%0D%0Abreak'],
    ['ünïcode', encodeURIComponent('ünïcode')],
  ])('subject %j is sent as %j and decodes back', async (subject, expected) => {
    const seen = await subjectSeen(subject);
    expect(seen).toBe(expected);
    expect(decodeURIComponent(seen)).toBe(subject);
  });

  it('a lone surrogate in a subject (possible in JSON) is encoded, not a crash', async () => {
    expect(await subjectSeen('x\ud800y')).toBe('x%EF%BF%BDy');
  });
});
