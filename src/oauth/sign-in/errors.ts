// The two ways a sign-in step refuses: back to the client at its redirect URI (once that URI is
// trusted), or on a page (before it is, or when there is no redirect to send to).

/** A problem that is safe to report to the client at its (validated) redirect URI. */
export class RedirectableError extends Error {
  readonly error: string;
  readonly description: string;
  constructor(error: string, description: string) {
    super(description);
    this.error = error;
    this.description = description;
  }
}

/** A problem reported on a page, never by redirect (the redirect target is not trusted, or unknown). */
export class PageError extends Error {
  readonly status: number;
  readonly title: string;
  readonly text: string;
  readonly headers: Record<string, string>;
  constructor(status: number, title: string, text: string, headers: Record<string, string> = {}) {
    super(text);
    this.status = status;
    this.title = title;
    this.text = text;
    this.headers = headers;
  }
}

export const SIGN_IN_OFF = new PageError(404, 'Sign-in is not available', 'Browser sign-in is not configured on this server.');
export const STALE = new PageError(
  400,
  'This sign-in link has expired',
  'This sign-in request has expired or was already used. Go back to your application and start signing in again.',
);
export const OTHER_BROWSER = new PageError(
  403,
  'Sign-in refused',
  'This sign-in was started in another browser (or its cookie was blocked). Start signing in again from your application, in this browser.',
);
