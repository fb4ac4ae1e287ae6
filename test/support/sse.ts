// Wire-level MCP helpers for tests that look at the bytes rather than at the SDK's view of them:
// an SSE reader and a raw Streamable HTTP session over fetch (optionally with extra headers such as
// the sidecar's Authorization).

import { expect } from 'vitest';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { initializeRequest } from './http.ts';

export interface SseEvent {
  id?: string;
  data: string;
}

/** Reads SSE events off a fetch body until `enough` says stop (or the stream ends). */
export async function readSse(body: ReadableStream<Uint8Array>, enough: (events: SseEvent[]) => boolean): Promise<SseEvent[]> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const events: SseEvent[] = [];
  let buffer = '';
  try {
    while (!enough(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event: SseEvent = { data: '' };
        for (const line of block.split('\n')) {
          if (line.startsWith('id:')) event.id = line.slice(3).trim();
          else if (line.startsWith('data:')) event.data += line.slice(5).trim();
        }
        // Keep-alive comments and priming events carry no message.
        if (event.data !== '') events.push(event);
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return events;
}

/** Initializes a session over plain fetch; `headers()` gives the headers every later request needs. */
export async function rawSession(
  url: string,
  base: Record<string, string> = {},
): Promise<{ sessionId: string; headers: (extra?: Record<string, string>) => Headers }> {
  const init = await fetch(url, {
    method: 'POST',
    headers: { ...base, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(initializeRequest('raw', 0)),
  });
  expect(init.status).toBe(200);
  const sessionId = init.headers.get('mcp-session-id');
  expect(sessionId).toBeTruthy();
  await init.body?.cancel();
  const headers = (extra: Record<string, string> = {}) =>
    new Headers({
      ...base,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': sessionId!,
      'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
      ...extra,
    });
  const initialized = await fetch(url, {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  expect(initialized.status).toBe(202);
  return { sessionId: sessionId!, headers };
}

/** tools/call of the reference upstream's `progress` tool over a raw session; the whole SSE answer. */
export async function progressOverSse(url: string, headers: Headers, steps: number): Promise<SseEvent[]> {
  const call = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'progress', arguments: { steps, delayMs: 0 }, _meta: { progressToken: 'p1' } },
    }),
  });
  expect(call.headers.get('content-type')).toContain('text/event-stream');
  return readSse(call.body!, () => false);
}
