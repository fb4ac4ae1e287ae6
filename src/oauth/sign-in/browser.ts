// What ties the steps of a sign-in to one browser: an HttpOnly SameSite cookie whose value's SHA-256
// is stored with each step, and a second, long-lived cookie whose SHA-256 keys the browser's
// remembered approvals. Over https both are __Host- cookies: only settable by this origin, path /.

import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { generateToken, hashToken, isTokenShaped } from '../../model/credentials.ts';
import { readCookie } from '../../web/cookies.ts';
import { OTHER_BROWSER, PageError } from './errors.ts';

export class BrowserCookies {
  readonly #secure: boolean;
  readonly #signInName: string;
  readonly #consentName: string;
  readonly #signInMaxAgeSeconds: number;
  readonly #consentMaxAgeSeconds: number;

  constructor(publicUrl: string, signInMaxAgeSeconds: number, consentMaxAgeSeconds: number) {
    this.#secure = publicUrl.startsWith('https:');
    // __Host-: only settable by this origin over https, path /; tossing from a sibling host is refused.
    this.#signInName = this.#secure ? '__Host-mcp-sign-in' : 'mcp-sign-in';
    this.#consentName = this.#secure ? '__Host-mcp-consent' : 'mcp-consent';
    this.#signInMaxAgeSeconds = signInMaxAgeSeconds;
    this.#consentMaxAgeSeconds = consentMaxAgeSeconds;
  }

  /** The random value that binds sign-in steps to this browser (reused across tabs), and its Set-Cookie. */
  binding(req: IncomingMessage): { value: string; setCookie: string } {
    return this.#cookie(req, this.#signInName, this.#signInMaxAgeSeconds);
  }

  /** The random value whose SHA-256 keys this browser's remembered approvals, and its Set-Cookie. */
  consentBinding(req: IncomingMessage): { value: string; setCookie: string } {
    return this.#cookie(req, this.#consentName, this.#consentMaxAgeSeconds);
  }

  /** The consent cookie this browser presents, if any. */
  consentCookie(req: IncomingMessage): string | undefined {
    return readCookie(req, this.#consentName);
  }

  /** Whether this browser presents the binding whose SHA-256 a step stored (constant time). */
  sameBrowser(req: IncomingMessage, stored: string | undefined): boolean {
    const presented = readCookie(req, this.#signInName);
    if (presented === undefined || stored === undefined || !isTokenShaped(stored)) return false;
    return timingSafeEqual(Buffer.from(hashToken(presented), 'hex'), Buffer.from(stored, 'hex'));
  }

  #cookie(req: IncomingMessage, name: string, maxAgeSeconds: number): { value: string; setCookie: string } {
    const value = readCookie(req, name) ?? generateToken();
    const attributes = ['Path=/', 'HttpOnly', 'SameSite=Lax', `Max-Age=${maxAgeSeconds}`];
    if (this.#secure) attributes.push('Secure');
    return { value, setCookie: `${name}=${value}; ${attributes.join('; ')}` };
  }
}

/**
 * A form of a sign-in page (`what`: "The consent form", "The code"): posted as a form, and not from
 * another site. A cross-site POST (CSRF) carries the other site's Origin; the SameSite cookie check
 * would refuse it too, this only answers earlier and more clearly.
 */
export function checkFormPost(req: IncomingMessage, publicUrl: string, what: string): void {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') throw new PageError(400, 'Bad request', `${what} must be posted as a form.`);
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null' && origin !== new URL(publicUrl).origin) throw OTHER_BROWSER;
}
