// The consent page shows a client-provided name as the user should read it: escaped, its format and
// control characters as U+FFFD, isolated from the sentence around it. A name stored before
// registration refused such characters, or edited in Redis, goes through the same rendering.

import { describe, expect, it } from 'vitest';
import { consentPage, type ConsentView } from '../../src/oauth/sign-in-pages.ts';

const view = (clientName: string | undefined): ConsentView => ({
  clientName,
  clientId: 'mcp_0123456789abcdef0123456789abcdef',
  redirectHost: '127.0.0.1:7777',
  scopes: [],
  idpHost: 'idp.example',
  requestId: 'r'.repeat(64),
  action: 'https://mcp.example/authorize/consent',
});

describe('consent page: the client name', () => {
  it.each([
    ['a right-to-left override', 'Safe \u202Eexe.elif', 'Safe \ufffdexe.elif'],
    ['isolates and embeddings', '\u2066Admin\u2069 \u202Atool\u202C', '\ufffdAdmin\ufffd \ufffdtool\ufffd'],
    ['zero-width characters', 'Goo\u200Bgle\u200D\uFEFF', 'Goo\ufffdgle\ufffd\ufffd'],
    ['a control character', 'ops\u0085bot', 'ops\ufffdbot'],
  ])('%s: shown as U+FFFD, never as itself', (_label, name, shown) => {
    const html = consentPage(view(name));
    expect(html).toContain(`“<bdi>${shown}</bdi>”`);
    expect(html).not.toMatch(/[\u202a-\u202e\u2066-\u2069\u200b-\u200f\ufeff\u0085]/);
  });

  it('ordinary names, right-to-left scripts included, are shown as they are, isolated and escaped', () => {
    expect(consentPage(view('Clåude – ツール'))).toContain('“<bdi>Clåude – ツール</bdi>”');
    expect(consentPage(view('שלום <b>'))).toContain('“<bdi>שלום &lt;b&gt;</bdi>”');
    expect(consentPage(view(undefined))).toContain('<h1>An application wants to use the MCP server as you</h1>');
  });
});
