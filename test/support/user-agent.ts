// A browser stand-in for sign-in tests that need no rendering: fetch with a cookie jar per host,
// redirects followed by hand (so each hop can be inspected), and the two forms of the flow (the
// sidecar's consent page, the demo IdP's login form) read from their HTML.

export interface Hop {
  url: string;
  status: number;
  location: string | undefined;
  body: string;
  headers: Headers;
}

export class UserAgent {
  /** host -> cookie name -> value */
  readonly jar = new Map<string, Map<string, string>>();

  cookieHeader(url: string): string | undefined {
    const cookies = this.jar.get(new URL(url).host);
    if (!cookies || cookies.size === 0) return undefined;
    return [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  #store(url: string, headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const host = new URL(url).host;
      if (!this.jar.has(host)) this.jar.set(host, new Map());
      this.jar.get(host)!.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
  }

  async request(
    url: string,
    init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {},
  ): Promise<Hop> {
    const headers: Record<string, string> = { ...init.headers };
    const cookie = this.cookieHeader(url);
    if (cookie !== undefined) headers.cookie = cookie;
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const res = await fetch(url, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body, redirect: 'manual' });
    this.#store(url, res.headers);
    const location = res.headers.get('location') ?? undefined;
    return { url, status: res.status, location: location && new URL(location, url).href, body: await res.text(), headers: res.headers };
  }

  /** Follows redirects from `hop` until a non-redirect, or a Location starting with `stopAt`. */
  async follow(hop: Hop, stopAt?: string): Promise<Hop> {
    let current = hop;
    for (let i = 0; i < 20 && current.location !== undefined && current.status >= 300 && current.status < 400; i++) {
      if (stopAt !== undefined && current.location.startsWith(stopAt)) return current;
      current = await this.request(current.location);
    }
    return current;
  }
}

/** The hidden anti-CSRF handle of the consent form. */
export function consentRequestId(html: string): string {
  const match = /name="request" value="([0-9a-f]{64})"/.exec(html);
  if (!match) throw new Error(`no consent form in: ${html.slice(0, 300)}`);
  return match[1]!;
}

/** The action of the demo IdP's login form. */
export function loginFormAction(html: string, pageUrl: string): string {
  const match = /<form method="post" action="([^"]+)"/.exec(html);
  if (!match) throw new Error(`no login form in: ${html.slice(0, 300)}`);
  return new URL(match[1]!, pageUrl).href;
}
