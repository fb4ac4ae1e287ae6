// Decoding of `Authorization: Basic` client credentials (RFC 6749 §2.3.1: each part form-urlencoded,
// then Base64): anything that is not exactly that shape is no credentials at all.

import { describe, expect, it } from 'vitest';
import { decodeBasic } from '../../src/oauth/client-auth.ts';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

describe('decodeBasic', () => {
  it.each<[string, string, { id: string; secret: string }]>([
    ['plain id and secret', `Basic ${b64('mcp_0123:s3cret')}`, { id: 'mcp_0123', secret: 's3cret' }],
    ['the scheme in any case', `bAsIc ${b64('a:b')}`, { id: 'a', secret: 'b' }],
    ['a colon in the secret stays in the secret', `Basic ${b64('a:b:c')}`, { id: 'a', secret: 'b:c' }],
    ['percent-encoding of both parts', `Basic ${b64('my%3Aclient:p%40ss%2Bword')}`, { id: 'my:client', secret: 'p@ss+word' }],
    ['+ is a space (form encoding)', `Basic ${b64('a+b:c+d')}`, { id: 'a b', secret: 'c d' }],
    ['UTF-8', `Basic ${b64('%C3%BC:%E2%82%AC')}`, { id: 'ü', secret: '€' }],
    ['an empty id (refused later, by length)', `Basic ${b64(':secret')}`, { id: '', secret: 'secret' }],
    ['an empty secret', `Basic ${b64('id:')}`, { id: 'id', secret: '' }],
  ])('%s', (_label, header, expected) => {
    expect(decodeBasic(header)).toEqual(expected);
  });

  it.each<[string, string]>([
    ['no colon', `Basic ${b64('just-an-id')}`],
    ['a malformed percent escape', `Basic ${b64('a%zz:b')}`],
    ['a truncated percent escape', `Basic ${b64('a:b%4')}`],
    ['not Base64', 'Basic !!!!'],
    ['base64url alphabet', `Basic ${b64('a:b??>').replace(/\+/g, '-').replace(/\//g, '_')}`],
    ['padding in the middle', 'Basic YTpi=YTpi'],
    ['two spaces', `Basic  ${b64('a:b')}`],
    ['a trailing space', `Basic ${b64('a:b')} `],
    ['no credentials', 'Basic '],
    ['another scheme', `Bearer ${b64('a:b')}`],
    ['the scheme glued on', `Basic${b64('a:b')}`],
  ])('%s is no credentials', (_label, header) => {
    expect(decodeBasic(header)).toBeNull();
  });
});
