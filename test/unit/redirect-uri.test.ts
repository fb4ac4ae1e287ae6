// Redirect URIs a client may register: https, or http on a loopback host (RFC 8252 §7.3); no fragment,
// no spaces or control characters (the URL parser would silently drop them, so the check is on the
// raw value, which is what is stored and later matched exactly).

import { describe, expect, it } from 'vitest';
import { checkRedirectUri } from '../../src/model/client-metadata.ts';

describe('checkRedirectUri', () => {
  it.each([
    'https://app.example.com/callback',
    'https://app.example.com:8443/cb?x=1',
    'HTTPS://APP.EXAMPLE.COM/cb',
    'http://localhost/cb',
    'http://localhost:33418/callback',
    'http://127.0.0.1:8976/cb',
    'http://[::1]:8976/cb',
    // All of 127.0.0.0/8 is the loopback interface, as everywhere else in the sidecar.
    'http://127.0.0.2/cb',
    'http://127.255.255.254:8976/cb',
  ])('%s is accepted as written', (uri) => {
    expect(checkRedirectUri(uri)).toBe(uri);
  });

  it.each([
    ['plain http to a remote host', 'http://app.example.com/cb'],
    ['a subdomain of localhost (a resolver may send it to DNS)', 'http://app.localhost/cb'],
    ['http on a private address', 'http://10.0.0.1/cb'],
    ['a look-alike of localhost', 'http://localhost.evil.example/cb'],
    ['a fragment', 'https://app.example.com/cb#frag'],
    ['an empty fragment', 'https://app.example.com/cb#'],
    ['a tab (the parser would drop it)', 'https://app.example.com/c\tb'],
    ['a newline', 'https://app.example.com/cb\n'],
    ['a NUL', 'https://app.example.com/cb\u0000'],
    ['a line separator', 'https://app.example.com/cb\u2028'],
    ['a space', 'https://app.example.com/c b'],
    ['a relative URI', '/callback'],
    ['javascript:', 'javascript:alert(1)'],
    ['data:', 'data:text/html,hi'],
    ['a private-use scheme (not for registration)', 'com.example.app:/callback'],
    ['an empty string', ''],
    ['over 2048 characters', `https://app.example.com/${'a'.repeat(2048)}`],
  ])('%s is refused', (_label, uri) => {
    expect(checkRedirectUri(uri)).toBeNull();
  });

  it.each([undefined, null, 42, ['https://a.example/cb'], { uri: 'https://a.example/cb' }])('a non-string (%j) is refused', (value) => {
    expect(checkRedirectUri(value)).toBeNull();
  });
});
