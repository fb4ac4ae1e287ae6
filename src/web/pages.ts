// The frame of every HTML page the browser sees (sign-in, the account page, connecting an upstream
// account, approvals): server-rendered, no script, every value escaped; served with headers that
// forbid framing (clickjacking), caching, sniffing and referrers. No CSP form-action: Chrome applies
// it to the redirects that follow a form POST (to the IdP, to the client), which would break Approve
// and Deny.

import type { ServerResponse } from 'node:http';

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const STYLE = `body{font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.3rem}code,.mono{font-family:ui-monospace,monospace;word-break:break-all}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.4rem 1rem}dt{color:#555}dd{margin:0}
.actions{display:flex;gap:1rem;margin-top:2rem}button{font-size:1rem;padding:.5rem 1.5rem;cursor:pointer}
.note{color:#555;font-size:.9rem}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
td form{margin:0}button:focus-visible{outline:3px solid #1a5fb4;outline-offset:2px}`;

/** A whole page: the shared head and style around `body` (already escaped by its caller). */
export function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`;
}

export function writePage(res: ServerResponse, status: number, html: string, headers: Record<string, string | string[]> = {}): void {
  res.statusCode = status;
  for (const [k, v] of Object.entries({ ...PAGE_HEADERS, ...headers })) res.setHeader(k, v);
  res.setHeader('content-length', Buffer.byteLength(html));
  res.end(html);
}

/** A page that explains why sign-in stopped here (no redirect: the client or its redirect URI is not trusted). */
export function messagePage(title: string, message: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}
