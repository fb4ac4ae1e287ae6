// How an identity header value is written (X-MCP-Auth-Subject, X-MCP-Auth-Client-Id): as it is when
// it is printable ASCII with no `%` and no space at either end; otherwise percent-encoded as UTF-8
// (`%` itself included). So a value containing `%` is always an encoding, two subjects never give the
// same header, and `decodeURIComponent(value)` always gives the subject back.

const AS_IS = /^[\x21-\x24\x26-\x7e](?:[\x20-\x24\x26-\x7e]*[\x21-\x24\x26-\x7e])?$/;
/** RFC 3986 unreserved characters pass; everything else is `%XX` (what encodeURIComponent does). */
const UNRESERVED = /[A-Za-z0-9\-_.!~*'()]/;

export function identityHeaderValue(value: string): string {
  if (AS_IS.test(value)) return value;
  // Byte by byte, not encodeURIComponent: a lone surrogate (possible in a JWT's JSON) must not throw.
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += byte < 0x80 && UNRESERVED.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
