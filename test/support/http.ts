// The requests tests send again and again, written once: a form POST (the OAuth endpoints), a JSON
// POST, Basic client credentials, and an MCP request to /mcp (initialize, or a ping). Each answers
// with the status, the headers and the body (parsed when it is JSON).

import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

export interface Answer {
  status: number;
  headers: Headers;
  /** The parsed JSON body; the text when it is not JSON; undefined when empty. */
  body: any;
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  let body: unknown = text === '' ? undefined : text;
  try {
    if (text !== '') body = JSON.parse(text);
  } catch {
    // not JSON: the text itself
  }
  return { status: res.status, headers: res.headers, body };
}

/** `application/x-www-form-urlencoded` POST, as OAuth clients send to /token, /revoke, /introspect. */
export async function postForm(url: string, params: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> {
  return answer(
    await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(params).toString(),
    }),
  );
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return answer(
    await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }),
  );
}

/** `client_secret_basic` credentials: each part form-urlencoded, then Base64 (RFC 6749 §2.3.1). */
export function basic(id: string, secret: string): Record<string, string> {
  return { authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}` };
}

/** The JSON-RPC body of an MCP `initialize` request. */
export function initializeRequest(clientName = 'test', id = 1): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: clientName, version: '1' } },
  };
}

/** A JSON-RPC `ping`: the smallest request that must reach the upstream. */
export const PING = '{"jsonrpc":"2.0","id":1,"method":"ping"}';

/** POST to an MCP endpoint with a bearer token (none: no Authorization header); `body` defaults to a ping. */
export async function postMcp(
  url: string,
  token: string | undefined,
  options: { body?: string; signal?: AbortSignal } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return answer(
    await fetch(url, { method: 'POST', headers, body: options.body ?? PING, ...(options.signal ? { signal: options.signal } : {}) }),
  );
}

/** The status of an MCP `initialize` through the sidecar of `stack` with `token`. */
export async function initializeStatus(stack: { mcpUrl: string }, token: string | undefined): Promise<number> {
  return (await postMcp(stack.mcpUrl, token, { body: JSON.stringify(initializeRequest()) })).status;
}
