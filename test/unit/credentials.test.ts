// The credential model: token format, hashing, header parsing, the
// master-token check and the record policy, all without a store.

import { describe, expect, it } from 'vitest';
import {
  MasterToken,
  TTL_7_DAYS,
  decideToken,
  generateToken,
  generateTokenFor,
  hashToken,
  isTokenShaped,
  parseAuthorization,
  refreshTokenState,
  codeUse,
  refreshUse,
  rotatedWithinGrace,
  type TokenLookup,
} from '../../src/model/credentials.ts';
import { clientBucket, hashBucket, keyLayout } from '../../src/store/records.ts';
import { accessTokenFromFields, refreshTokenFromFields, userTokenFromFields, type Fields } from '../../src/store/records.ts';

const TOKEN = 'a3f1'.repeat(16);

describe('generateToken', () => {
  it('10,000 tokens: all 64 lowercase hex, all distinct', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const t = generateToken();
      expect(t).toMatch(/^[0-9a-f]{64}$/);
      seen.add(t);
    }
    expect(seen.size).toBe(10_000);
  });

  it('uses every hex digit (32 random bytes, zero-padded, not a narrowed alphabet)', () => {
    const digits = new Set<string>();
    for (let i = 0; i < 50; i++) for (const c of generateToken()) digits.add(c);
    expect([...digits].sort().join('')).toBe('0123456789abcdef');
  });
});

describe("generateTokenFor (a client's tokens land in the client's Cluster bucket)", () => {
  it("is token-shaped, and its hash names the bucket of the client, so its key carries the client's tag", () => {
    const keys = keyLayout('mcpauth:');
    for (const clientId of ['c1', 'mcp_abc', 'https://app.example/client.json', 'émoji-✓']) {
      const t = generateTokenFor(clientId);
      expect(isTokenShaped(t)).toBe(true);
      expect(hashBucket(hashToken(t))).toBe(clientBucket(clientId));
      const tag = `{oauth:${clientBucket(clientId)}}`;
      expect(keys.accessToken(hashToken(t))).toContain(tag);
      expect(keys.client(clientId)).toContain(tag);
      expect(keys.clientTokens(clientId)).toContain(tag);
      expect(keys.refreshFamily(clientId, 'any-family')).toContain(tag);
    }
  });

  it('leaves the token itself random: 64 draws for one client are all different and use every hex digit', () => {
    const drawn = new Set(Array.from({ length: 64 }, () => generateTokenFor('c1')));
    expect(drawn.size).toBe(64);
    const digits = new Set([...drawn].join(''));
    expect(digits.size).toBe(16);
  });

  it('spreads clients over the buckets: 2,000 client ids name more than 240 of the 256', () => {
    const used = new Set(Array.from({ length: 2000 }, (_, i) => clientBucket(`client-${i}`)));
    expect(used.size).toBeGreaterThan(240);
  });
});

describe('hashToken', () => {
  it('is SHA-256 as 64 lowercase hex (FIPS 180-2 vector for "abc")', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashToken('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('of a token is token-shaped and differs from the token', () => {
    const t = generateToken();
    expect(isTokenShaped(hashToken(t))).toBe(true);
    expect(hashToken(t)).not.toBe(t);
    expect(hashToken(t)).toBe(hashToken(t));
  });
});

describe('parseAuthorization', () => {
  const cases: Array<[string, string[], 'missing' | 'malformed' | 'bearer' | 'dpop']> = [
    ['no headers at all', [], 'missing'],
    ['other headers only', ['Host', 'example.com', 'Accept', '*/*'], 'missing'],
    ['Bearer <64 hex>', ['Authorization', `Bearer ${TOKEN}`], 'bearer'],
    ['lowercase header name', ['authorization', `Bearer ${TOKEN}`], 'bearer'],
    ['scheme "bearer"', ['Authorization', `bearer ${TOKEN}`], 'bearer'],
    ['scheme "BEARER"', ['Authorization', `BEARER ${TOKEN}`], 'bearer'],
    ['scheme "BeArEr"', ['Authorization', `BeArEr ${TOKEN}`], 'bearer'],
    ['empty value', ['Authorization', ''], 'malformed'],
    ['scheme only', ['Authorization', 'Bearer'], 'malformed'],
    ['scheme and space only', ['Authorization', 'Bearer '], 'malformed'],
    ['Basic scheme', ['Authorization', `Basic ${Buffer.from('user:pass').toString('base64')}`], 'malformed'],
    ['Basic scheme with a 64-hex value', ['Authorization', `Basic0${TOKEN}`], 'malformed'],
    ['token without scheme', ['Authorization', TOKEN], 'malformed'],
    ['two spaces', ['Authorization', `Bearer  ${TOKEN}`], 'malformed'],
    ['leading space', ['Authorization', ` Bearer ${TOKEN}`], 'malformed'],
    ['trailing space', ['Authorization', `Bearer ${TOKEN} `], 'malformed'],
    ['tab as separator', ['Authorization', `Bearer\t${TOKEN}`], 'malformed'],
    ['uppercase hex', ['Authorization', `Bearer ${TOKEN.toUpperCase()}`], 'malformed'],
    ['one uppercase hex digit', ['Authorization', `Bearer A${TOKEN.slice(1)}`], 'malformed'],
    ['63 characters', ['Authorization', `Bearer ${TOKEN.slice(1)}`], 'malformed'],
    ['65 characters', ['Authorization', `Bearer ${TOKEN}0`], 'malformed'],
    ['non-hex letter', ['Authorization', `Bearer g${TOKEN.slice(1)}`], 'malformed'],
    ['Unicode letter', ['Authorization', `Bearer é${TOKEN.slice(1)}`], 'malformed'],
    ['fullwidth digit', ['Authorization', `Bearer \uff11${TOKEN.slice(1)}`], 'malformed'],
    ['Unicode scheme look-alike', ['Authorization', `Bеarer ${TOKEN}`], 'malformed'],
    ['NUL character', ['Authorization', `Bearer \u0000${TOKEN.slice(1)}`], 'malformed'],
    ['CR character', ['Authorization', `Bearer ${TOKEN.slice(1)}\r`], 'malformed'],
    ['DEL character', ['Authorization', `Bearer ${TOKEN.slice(1)}\u007f`], 'malformed'],
    ['comma-separated second token', ['Authorization', `Bearer ${TOKEN}, Bearer ${TOKEN}`], 'malformed'],
    ['duplicate Authorization (same value)', ['Authorization', `Bearer ${TOKEN}`, 'authorization', `Bearer ${TOKEN}`], 'malformed'],
    ['duplicate Authorization (second one bad)', ['Authorization', `Bearer ${TOKEN}`, 'Authorization', 'Basic x'], 'malformed'],
    ['duplicate Authorization (first one empty)', ['Authorization', '', 'Authorization', `Bearer ${TOKEN}`], 'malformed'],
    // RFC 9449 §7.1: the DPoP scheme, held to the same strictness.
    ['DPoP <64 hex>', ['Authorization', `DPoP ${TOKEN}`], 'dpop'],
    ['scheme "dpop"', ['Authorization', `dpop ${TOKEN}`], 'dpop'],
    ['scheme "DPOP"', ['Authorization', `DPOP ${TOKEN}`], 'dpop'],
    ['DPoP scheme only', ['Authorization', 'DPoP'], 'malformed'],
    ['DPoP scheme and space only', ['Authorization', 'DPoP '], 'malformed'],
    ['DPoP two spaces', ['Authorization', `DPoP  ${TOKEN}`], 'malformed'],
    ['DPoP tab as separator', ['Authorization', `DPoP\t${TOKEN}`], 'malformed'],
    ['DPoP trailing space', ['Authorization', `DPoP ${TOKEN} `], 'malformed'],
    ['DPoP 63 characters', ['Authorization', `DPoP ${TOKEN.slice(1)}`], 'malformed'],
    ['DPoP 65 characters', ['Authorization', `DPoP ${TOKEN}0`], 'malformed'],
    ['DPoP uppercase hex', ['Authorization', `DPoP ${TOKEN.toUpperCase()}`], 'malformed'],
    ['DPoP with a JWT-shaped value', ['Authorization', 'DPoP eyJhbGciOiJFUzI1NiJ9.e30.sig'], 'malformed'],
    ['DPoP look-alike scheme "DPoQ"', ['Authorization', `DPoQ ${TOKEN}`], 'malformed'],
    ['Bearer scheme spelled with the DPoP length', ['Authorization', `Bear ${TOKEN}`], 'malformed'],
    ['DPoP and Bearer headers together', ['Authorization', `DPoP ${TOKEN}`, 'Authorization', `Bearer ${TOKEN}`], 'malformed'],
  ];

  it.each(cases)('%s -> %s', (_label, rawHeaders, expected) => {
    const parsed = parseAuthorization(rawHeaders);
    if (expected === 'bearer' || expected === 'dpop') expect(parsed).toEqual({ kind: 'token', token: TOKEN, scheme: expected });
    else expect(parsed).toEqual({ kind: expected });
  });

  it('a header merely containing "authorization" in its name is not the Authorization header', () => {
    expect(parseAuthorization(['X-Authorization', `Bearer ${TOKEN}`]).kind).toBe('missing');
    expect(parseAuthorization(['Proxy-Authorization', `Bearer ${TOKEN}`]).kind).toBe('missing');
  });
});

describe('MasterToken', () => {
  const secret = generateToken();
  const master = new MasterToken(secret);

  it('matches the exact value', () => {
    expect(master.matches(secret)).toBe(true);
    expect(master.matches(`${secret}`)).toBe(true);
  });

  it.each<[string, unknown]>([
    ['another token', generateToken()],
    ['one character changed', `${secret.slice(0, 63)}${secret[63] === '0' ? '1' : '0'}`],
    ['shorter (prefix)', secret.slice(0, 63)],
    ['a short prefix', secret.slice(0, 8)],
    ['longer', `${secret}0`],
    ['the secret twice', secret + secret],
    ['uppercase', secret.toUpperCase()],
    ['with whitespace', ` ${secret}`],
    ['empty string', ''],
    ['undefined', undefined],
    ['null', null],
    ['a number', 42],
    ['an object', { toString: () => secret }],
    ['an array', [secret]],
    ['a Buffer of the secret', Buffer.from(secret)],
  ])('rejects %s', (_label, candidate) => {
    expect(master.matches(candidate)).toBe(false);
  });

  it.each([
    ['uppercase', secret.toUpperCase()],
    ['63 characters', secret.slice(1)],
    ['65 characters', `${secret}a`],
    ['empty', ''],
    ['non-hex', 'z'.repeat(64)],
    ['with a newline', `${secret.slice(1)}\n`],
  ])('constructor throws on a malformed secret (%s)', (_label, bad) => {
    expect(() => new MasterToken(bad)).toThrow(/64 lowercase hex/);
  });

  it('two instances with the same secret agree (per-process keys do not change the answer)', () => {
    const other = new MasterToken(secret);
    expect(other.matches(secret)).toBe(true);
    expect(other.matches(generateToken())).toBe(false);
  });
});

// The stored fields as the store parses them (src/store/records.ts), then decided: the whole policy
// from a record's bytes to the answer.
describe('decideToken on parsed records', () => {
  const hash = hashToken(TOKEN);
  const NOW = 1_760_000_000_000;
  const user = (over: Record<string, string | undefined> = {}) =>
    userTokenFromFields(
      clean({
        tokenHash: hash,
        subject: 'alice',
        issuer: 'https://idp.example.com/',
        revoked: 'false',
        createdAt: String(NOW - 1000),
        expiresAt: String(NOW + TTL_7_DAYS),
        ...over,
      }),
      hash,
    );
  const oauth = (over: Record<string, string | undefined> = {}) =>
    accessTokenFromFields(
      clean({
        tokenHash: hash,
        clientId: 'client-1',
        createdAt: String(NOW - 1000),
        expiresAt: String(NOW + 3_600_000),
        ...over,
      }),
      hash,
    );
  function clean(f: Record<string, string | undefined>): Fields {
    const out: Fields = {};
    for (const [k, v] of Object.entries(f)) if (v !== undefined) out[k] = v;
    return out;
  }

  it('a DPoP binding (an RFC 7638 thumbprint) is carried to the principal; anything else in its place is a corrupt record', () => {
    const jkt = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs';
    const bound = decideToken(hash, { user: null, oauth: oauth({ dpopJkt: jkt }) }, NOW);
    expect(bound.ok && bound.principal.dpopJkt).toBe(jkt);
    const boundUser = decideToken(hash, { user: user({ dpopJkt: jkt }), oauth: null }, NOW);
    expect(boundUser.ok && boundUser.principal.dpopJkt).toBe(jkt);
    for (const bad of ['', 'short', `${jkt}=`, jkt.replace('-', '+')]) {
      expect(decideToken(hash, { user: null, oauth: oauth({ dpopJkt: bad }) }, NOW)).toEqual({ ok: false, reason: 'corrupt' });
      expect(decideToken(hash, { user: user({ dpopJkt: bad }), oauth: null }, NOW)).toEqual({ ok: false, reason: 'corrupt' });
    }
    const unbound = decideToken(hash, { user: null, oauth: oauth() }, NOW);
    expect(unbound.ok && unbound.principal).not.toHaveProperty('dpopJkt');
  });

  it('TTL_7_DAYS is 7 × 24 × 60 × 60 × 1000 ms', () => {
    expect(TTL_7_DAYS).toBe(604_800_000);
  });

  it('a valid user-grade record authorizes as kind user with the IdP subject', () => {
    expect(decideToken(hash, { user: user(), oauth: null }, NOW)).toEqual({
      ok: true,
      principal: { kind: 'user', subject: 'alice', issuer: 'https://idp.example.com/', tokenHash: hash, expiresAt: NOW + TTL_7_DAYS },
    });
  });

  it('a valid OAuth record authorizes as kind oauth with the clientId as subject (and its scope)', () => {
    expect(decideToken(hash, { user: null, oauth: oauth({ scope: 'mcp:read' }) }, NOW)).toEqual({
      ok: true,
      principal: {
        kind: 'oauth',
        subject: 'client-1',
        clientId: 'client-1',
        tokenHash: hash,
        expiresAt: NOW + 3_600_000,
        scope: 'mcp:read',
      },
    });
    const noScope = decideToken(hash, { user: null, oauth: oauth() }, NOW);
    expect(noScope.ok && noScope.principal.scope).toBeUndefined();
  });

  it('an OAuth record from browser sign-in acts for the IdP user: subject, email and groups', () => {
    const signedIn = oauth({
      subject: 'idp-sub-1',
      issuer: 'https://idp.example.com/',
      email: 'ada@example.com',
      groups: '["eng","mcp-users"]',
    });
    expect(decideToken(hash, { user: null, oauth: signedIn }, NOW)).toEqual({
      ok: true,
      principal: {
        kind: 'oauth',
        subject: 'idp-sub-1',
        issuer: 'https://idp.example.com/',
        clientId: 'client-1',
        tokenHash: hash,
        expiresAt: NOW + 3_600_000,
        email: 'ada@example.com',
        groups: ['eng', 'mcp-users'],
      },
    });
  });

  it.each(['not json', '{"a":1}', '["eng",1]'])('a groups field that is not a list of strings (%s) is corrupt: refused', (groups) => {
    expect(decideToken(hash, { user: null, oauth: oauth({ subject: 'idp-sub-1', groups }) }, NOW)).toEqual({
      ok: false,
      reason: 'corrupt',
    });
    expect(decideToken(hash, { user: user({ groups }), oauth: null }, NOW)).toEqual({ ok: false, reason: 'corrupt' });
  });

  it('a user-grade record keeps the exchanged email and groups', () => {
    expect(decideToken(hash, { user: user({ email: 'ann@example.com', groups: '["eng"]' }), oauth: null }, NOW)).toEqual({
      ok: true,
      principal: {
        kind: 'user',
        subject: 'alice',
        issuer: 'https://idp.example.com/',
        tokenHash: hash,
        expiresAt: NOW + TTL_7_DAYS,
        email: 'ann@example.com',
        groups: ['eng'],
      },
    });
  });

  const table: Array<[string, TokenLookup, number, string]> = [
    ['nothing found', { user: null, oauth: null }, NOW, 'unknown'],
    // user-grade
    ['user: revoked "true"', { user: user({ revoked: 'true' }), oauth: null }, NOW, 'revoked'],
    ['user: 1 ms before expiresAt', { user: user({ expiresAt: String(NOW + 1) }), oauth: null }, NOW, 'ok'],
    ['user: exactly at expiresAt', { user: user({ expiresAt: String(NOW) }), oauth: null }, NOW, 'expired'],
    ['user: after expiresAt', { user: user({ expiresAt: String(NOW - 1) }), oauth: null }, NOW, 'expired'],
    ['user: expiresAt 0', { user: user({ expiresAt: '0' }), oauth: null }, NOW, 'expired'],
    ['user: revoked "TRUE"', { user: user({ revoked: 'TRUE' }), oauth: null }, NOW, 'corrupt'],
    ['user: revoked "1"', { user: user({ revoked: '1' }), oauth: null }, NOW, 'corrupt'],
    ['user: revoked ""', { user: user({ revoked: '' }), oauth: null }, NOW, 'corrupt'],
    ['user: revoked "False"', { user: user({ revoked: 'False' }), oauth: null }, NOW, 'corrupt'],
    ['user: revoked "false " (padded)', { user: user({ revoked: 'false ' }), oauth: null }, NOW, 'corrupt'],
    ['user: revoked missing', { user: user({ revoked: undefined }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt missing', { user: user({ expiresAt: undefined }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt ""', { user: user({ expiresAt: '' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt "abc"', { user: user({ expiresAt: 'abc' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt "1.5"', { user: user({ expiresAt: '1.5' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt float in the future', { user: user({ expiresAt: `${NOW + 1000}.5` }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt negative', { user: user({ expiresAt: '-1' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt exponent', { user: user({ expiresAt: '1e20' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt hex', { user: user({ expiresAt: '0xffffffffffff' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt padded', { user: user({ expiresAt: ` ${NOW + 1000}` }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt "Infinity"', { user: user({ expiresAt: 'Infinity' }), oauth: null }, NOW, 'corrupt'],
    ['user: expiresAt 17 digits', { user: user({ expiresAt: '99999999999999999' }), oauth: null }, NOW, 'corrupt'],
    ['user: subject missing', { user: user({ subject: undefined }), oauth: null }, NOW, 'corrupt'],
    ['user: subject empty', { user: user({ subject: '' }), oauth: null }, NOW, 'corrupt'],
    ['user: tokenHash of another token', { user: user({ tokenHash: hashToken('other') }), oauth: null }, NOW, 'corrupt'],
    ['user: tokenHash uppercase', { user: user({ tokenHash: hash.toUpperCase() }), oauth: null }, NOW, 'corrupt'],
    ['user: revoked wins over expired', { user: user({ revoked: 'true', expiresAt: String(NOW - 1) }), oauth: null }, NOW, 'revoked'],
    // OAuth
    ['oauth: revokedAt set', { user: null, oauth: oauth({ revokedAt: String(NOW - 1) }) }, NOW, 'revoked'],
    ['oauth: revokedAt set in the future', { user: null, oauth: oauth({ revokedAt: String(NOW + 10_000) }) }, NOW, 'revoked'],
    ['oauth: revokedAt empty', { user: null, oauth: oauth({ revokedAt: '' }) }, NOW, 'revoked'],
    ['oauth: 1 ms before expiresAt', { user: null, oauth: oauth({ expiresAt: String(NOW + 1) }) }, NOW, 'ok'],
    ['oauth: exactly at expiresAt', { user: null, oauth: oauth({ expiresAt: String(NOW) }) }, NOW, 'expired'],
    ['oauth: expiresAt missing', { user: null, oauth: oauth({ expiresAt: undefined }) }, NOW, 'corrupt'],
    ['oauth: expiresAt "abc"', { user: null, oauth: oauth({ expiresAt: 'abc' }) }, NOW, 'corrupt'],
    ['oauth: expiresAt "1.5"', { user: null, oauth: oauth({ expiresAt: '1.5' }) }, NOW, 'corrupt'],
    ['oauth: clientId missing', { user: null, oauth: oauth({ clientId: undefined }) }, NOW, 'corrupt'],
    ['oauth: tokenHash of another token', { user: null, oauth: oauth({ tokenHash: hashToken('other') }) }, NOW, 'corrupt'],
    // both
    ['both collections hold the hash', { user: user(), oauth: oauth() }, NOW, 'corrupt'],
    ['both collections, user revoked', { user: user({ revoked: 'true' }), oauth: oauth() }, NOW, 'corrupt'],
  ];

  it.each(table)('%s -> %s', (_label, found, now, expected) => {
    const decision = decideToken(hash, found, now);
    if (expected === 'ok') expect(decision.ok).toBe(true);
    else expect(decision).toEqual({ ok: false, reason: expected });
  });
});

describe('refreshTokenFromFields and refreshTokenState', () => {
  const now = 1_700_000_000_000;
  const base = { tokenHash: 'h', clientId: 'c', familyId: 'f', createdAt: String(now - 1000), expiresAt: String(now + 1000) };
  it.each([
    ['usable', base, 'usable'],
    ['rotated', { ...base, rotatedAt: String(now - 10) }, 'rotated'],
    ['revoked wins over rotated', { ...base, rotatedAt: '1', revokedAt: '2' }, 'revoked'],
    ['expired at exactly expiresAt', { ...base, expiresAt: String(now) }, 'expired'],
    ['expiresAt not a number', { ...base, expiresAt: 'soon' }, 'corrupt'],
    ['expiresAt missing', { tokenHash: 'h', clientId: 'c', familyId: 'f' }, 'corrupt'],
    ['no family', { ...base, familyId: '' }, 'corrupt'],
    ['no client', { ...base, clientId: '' }, 'corrupt'],
  ] as const)('%s', (_name, fields, expected) => {
    // As the refresh grant reads a stored token: parsed (refusing what is corrupt), then its state.
    const token = refreshTokenFromFields(fields as Record<string, string>);
    expect(token === 'corrupt' ? token : refreshTokenState(token, now)).toBe(expected);
  });
});

describe('rotatedWithinGrace', () => {
  const at = 1_700_000_000_000;
  it.each([
    ['just rotated', String(at), at, 5000, true],
    ['last millisecond of the window', String(at), at + 4999, 5000, true],
    ['window over', String(at), at + 5000, 5000, false],
    ['a clock behind the rotating one, within the window', String(at), at - 4999, 5000, true],
    ['a clock far behind cannot widen it', String(at), at - 5000, 5000, false],
    ['window off', String(at), at, 0, false],
    ['unparsable rotatedAt', 'soon', at, 5000, false],
    ['negative rotatedAt', '-1', at, 5000, false],
    ['empty rotatedAt', '', at, 5000, false],
  ])('%s', (_, rotatedAt, now, graceMs, expected) => {
    expect(rotatedWithinGrace(rotatedAt, now, graceMs)).toBe(expected);
  });
});

describe('refreshUse', () => {
  const at = 1_700_000_000_000;
  const fresh = { clientId: 'c1', revokedAt: null, rotatedAt: null, familyId: 'f1' };
  it.each([
    ['an unrotated token of the client and family rotates', fresh, 'rotate'],
    ['an unknown token', { clientId: null, revokedAt: null, rotatedAt: null, familyId: null }, 'invalid'],
    ["another client's token", { ...fresh, clientId: 'c2' }, 'invalid'],
    ['a token of another family', { ...fresh, familyId: 'f2' }, 'invalid'],
    ['a token with no family', { ...fresh, familyId: null }, 'invalid'],
    ['a revoked token, even rotated long ago', { ...fresh, revokedAt: String(at), rotatedAt: String(at - 3_600_000) }, 'invalid'],
    ['rotated within the window', { ...fresh, rotatedAt: String(at - 4999) }, 'grace'],
    ['rotated before the window', { ...fresh, rotatedAt: String(at - 5000) }, 'reused'],
    ['an unreadable rotatedAt counts as outside the window', { ...fresh, rotatedAt: 'soon' }, 'reused'],
  ] as const)('%s', (_, old, expected) => {
    expect(refreshUse(old, 'c1', 'f1', at, 5000)).toBe(expected);
  });

  it('without a window, any second use is reuse', () => {
    expect(refreshUse({ ...fresh, rotatedAt: String(at) }, 'c1', 'f1', at, 0)).toBe('reused');
  });
});

describe('codeUse', () => {
  const at = 1_700_000_000_000;
  const fresh = { clientId: 'c1', expiresAt: String(at + 60_000), redeemedAt: null };
  it.each([
    ['an unredeemed, unexpired code of the client is redeemed', fresh, 'redeem'],
    ['an unknown code', { clientId: null, expiresAt: null, redeemedAt: null }, 'invalid'],
    ["another client's code, even redeemed", { ...fresh, clientId: 'c2', redeemedAt: String(at) }, 'invalid'],
    ['an expired code', { ...fresh, expiresAt: String(at) }, 'invalid'],
    ['an unreadable expiry', { ...fresh, expiresAt: 'later' }, 'invalid'],
    ['no expiry', { ...fresh, expiresAt: null }, 'invalid'],
    ['a redeemed code, even past its expiry, is reuse', { ...fresh, expiresAt: String(at - 1), redeemedAt: String(at - 2) }, 'reused'],
  ] as const)('%s', (_, code, expected) => {
    expect(codeUse(code, 'c1', at)).toBe(expected);
  });
});
