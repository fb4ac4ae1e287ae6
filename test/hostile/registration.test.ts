// Control characters in registered metadata: a CR/LF stored in a redirect URI or a client name ends
// up in headers, logs and pages later. Every string of a registration is refused with a clear
// RFC 7591 error when it holds one, and nothing is stored; the admin createClient refuses them too.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.ts';

describe('registered metadata: no control characters', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ config: { oauth: { registrationRateLimitPerMinute: 1000 } } });
  });
  afterAll(async () => {
    await stack.close();
  });

  const register = async (body: Record<string, unknown>) => {
    const res = await fetch(`${stack.proxyUrl}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { error: string; error_description?: string } };
  };
  const clientCount = async () => ((await stack.admin('listClients')).body.clients as unknown[]).length;

  it.each([
    ['CR/LF in a redirect URI', { redirect_uris: ['https://app.example/cb\r\nSet-Cookie: a=b'] }, 'invalid_redirect_uri'],
    ['LF inside the host of a redirect URI', { redirect_uris: ['https://app.ex\nample/cb'] }, 'invalid_redirect_uri'],
    ['a tab in a redirect URI', { redirect_uris: ['http://127.0.0.1:9/c\tb'] }, 'invalid_redirect_uri'],
    ['a trailing NUL in a redirect URI', { redirect_uris: ['https://app.example/cb\u0000'] }, 'invalid_redirect_uri'],
    ['a space in a redirect URI', { redirect_uris: ['https://app.example/c b'] }, 'invalid_redirect_uri'],
    ['CR/LF in client_name', { client_name: 'Claude\r\nX-Injected: 1' }, 'invalid_client_metadata'],
    ['a C1 control (NEL) in client_name', { client_name: 'Claude\u0085' }, 'invalid_client_metadata'],
    ['a line separator in client_name', { client_name: 'Claude\u2028' }, 'invalid_client_metadata'],
    ['ESC in client_name', { client_name: '\u001b[31mred' }, 'invalid_client_metadata'],
    ['a tab in scope', { scope: 'read\twrite' }, 'invalid_client_metadata'],
    ['CR/LF in client_uri (a field this server does not keep)', { client_uri: 'https://app.example/\r\n' }, 'invalid_client_metadata'],
    ['CR/LF in contacts', { contacts: ['ops@example.com\r\nBcc: x@example.com'] }, 'invalid_client_metadata'],
  ])('%s: 400, nothing stored', async (_name, metadata, error) => {
    const before = await clientCount();
    const res = await register({ client_name: 'x', redirect_uris: ['https://app.example/cb'], ...metadata });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe(error);
    expect(res.body.error_description).toMatch(/control character|redirect URI/);
    expect(await clientCount()).toBe(before);
  });

  // Bidi controls and zero-width characters: invisible on the consent page, they make a name read as
  // another ("\u202Eexe.elif" shows as "file.exe", "Goo\u200Bgle" as "Google").
  it.each([
    ['a right-to-left override', 'Claude \u202Eedoc'],
    ['a left-to-right embedding', 'Claude \u202Aapp'],
    ['an isolate pair', 'Claude \u2067app\u2069'],
    ['a right-to-left mark', 'Claude\u200F'],
    ['the Arabic letter mark', 'Claude\u061C'],
    ['a zero-width space', 'Goo\u200Bgle'],
    ['a zero-width joiner', 'Claude\u200DCode'],
    ['a word joiner', 'Claude\u2060Code'],
    ['a byte order mark', '\uFEFFClaude'],
    ['a soft hyphen', 'Clau\u00ADde'],
  ])('%s in client_name: invalid_client_metadata, nothing stored', async (_name, clientName) => {
    const before = await clientCount();
    const res = await register({ client_name: clientName, redirect_uris: ['https://app.example/cb'] });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_client_metadata']);
    expect(res.body.error_description).toMatch(/invisible formatting characters/);
    expect(await clientCount()).toBe(before);
  });

  it('printable Unicode stays allowed', async () => {
    const res = await register({ client_name: 'Clåude – ツール', redirect_uris: ['https://app.example/cb'] });
    expect(res.status).toBe(201);
  });

  it('the admin createClient refuses them too', async () => {
    expect((await stack.admin('createClient', { clientName: 'ops\r\nbot' })).body.error).toBe('invalid_request');
    expect((await stack.admin('createClient', { clientName: 'ops\u202Ebot' })).body.error).toBe('invalid_request');
    expect((await stack.admin('createClient', { redirectUris: ['https://app.example/cb\n'] })).status).toBe(400);
  });
});
