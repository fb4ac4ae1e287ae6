// Reading the cookies this server sets on its browser pages (sign-in, the account page): a value is
// taken only when it has the shape the server gives it, so a forged or oversized header reads as none.

import type { IncomingMessage } from 'node:http';
import { isTokenShaped } from '../model/credentials.ts';

/**
 * The value of one cookie, when it has the shape this server sets (`shaped`; by default 64 hex, the
 * sign-in and account cookies); otherwise undefined.
 */
export function readCookie(req: IncomingMessage, name: string, shaped: (value: string) => boolean = isTokenShaped): string | undefined {
  const header = req.headers.cookie;
  if (header === undefined || header.length > 8192) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    return shaped(value) ? value : undefined;
  }
  return undefined;
}
