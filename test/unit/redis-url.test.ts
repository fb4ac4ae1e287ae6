// REDIS_URL parsing and masking (src/store/redis-url.ts): every accepted form, the rejected ones, TLS
// variants, and that credentials never appear in what is printed.

import { describe, expect, it } from 'vitest';
import { parseRedisUrl, redactRedisUrl } from '../../src/store/redis-url.ts';

describe('parseRedisUrl: accepted forms', () => {
  it.each([
    'redis://127.0.0.1:6379',
    'redis://localhost',
    'redis://:secret@redis.internal:6380/2',
    'redis://sidecar:p%40ss@redis.internal:6379/0',
    'rediss://redis.example.com:6380',
    'redis://[::1]:6379',
  ])('standalone %s is passed to ioredis as it is', (url) => {
    expect(parseRedisUrl(url)).toEqual({ mode: 'standalone', url });
  });

  it('Sentinel: every sentinel, the master name, the db, no TLS', () => {
    expect(parseRedisUrl('redis+sentinel://s1:26379,s2:26380,[fd00::3]:26381/mymaster/3')).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
        { host: 'fd00::3', port: 26381 },
      ],
      name: 'mymaster',
      db: 3,
      tls: false,
    });
  });

  it('Sentinel without a db uses db 0; a trailing comma in the host list is ignored', () => {
    expect(parseRedisUrl('redis+sentinel://s1:26379,/mymaster')).toMatchObject({
      mode: 'sentinel',
      sentinels: [{ host: 's1', port: 26379 }],
      name: 'mymaster',
      db: 0,
    });
  });

  it('Sentinel with a password only, and with an ACL user and password (percent-decoded)', () => {
    expect(parseRedisUrl('redis+sentinel://:secret@s1:26379/m')).toMatchObject({ password: 'secret' });
    expect(parseRedisUrl('redis+sentinel://:secret@s1:26379/m')).not.toHaveProperty('username');
    expect(parseRedisUrl('redis+sentinel://sidecar:p%40ss%2Fw%3Ard@s1:26379/m')).toMatchObject({
      username: 'sidecar',
      password: 'p@ss/w:rd',
    });
  });

  it('a password keeps every colon after the first (user:pa:ss is user "user", password "pa:ss")', () => {
    expect(parseRedisUrl('redis+cluster://user:pa:ss@n1:7000')).toMatchObject({ username: 'user', password: 'pa:ss' });
  });

  it('a password holding an unencoded @ is split at the last @', () => {
    expect(parseRedisUrl('redis+cluster://:p@ss@n1:7000')).toMatchObject({ password: 'p@ss', nodes: [{ host: 'n1', port: 7000 }] });
  });

  it('a user name alone (no colon) is a user without a password', () => {
    const parsed = parseRedisUrl('redis+cluster://sidecar@n1:7000');
    expect(parsed).toMatchObject({ username: 'sidecar' });
    expect(parsed).not.toHaveProperty('password');
  });

  it('Cluster: every seed node, no TLS', () => {
    expect(parseRedisUrl('redis+cluster://n1:7000,n2:7001,n3:7002')).toEqual({
      mode: 'cluster',
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
        { host: 'n3', port: 7002 },
      ],
      tls: false,
    });
  });

  it.each([
    ['rediss+sentinel://:pw@s1:26379/m', 'sentinel'],
    ['rediss+cluster://:pw@n1:7000', 'cluster'],
  ])('TLS variant %s', (url, mode) => {
    expect(parseRedisUrl(url)).toMatchObject({ mode, tls: true, password: 'pw' });
  });

  it.each([
    ['redis+sentinel://s1:26379/m', 'sentinel'],
    ['redis+cluster://n1:7000', 'cluster'],
  ])('plain variant %s has TLS off', (url, mode) => {
    expect(parseRedisUrl(url)).toMatchObject({ mode, tls: false });
  });
});

describe('parseRedisUrl: rejected forms', () => {
  it.each([
    ['http://127.0.0.1:6379', /must start with redis:\/\//],
    ['redis:/127.0.0.1:6379', /must start with/],
    ['REDIS://127.0.0.1:6379', /must start with/],
    ['redis+foo://h:1', /must start with/],
    ['127.0.0.1:6379', /must start with/],
    ['', /must start with/],
    ['redis://[::1:6379', /not a valid URL/],
    ['redis://h:99999', /not a valid URL/],
    ['redis+sentinel://s1/mymaster', /host "s1" must be host:port/],
    ['redis+sentinel://s1:0/mymaster', /port 1-65535/],
    ['redis+sentinel://s1:65536/mymaster', /port 1-65535/],
    ['redis+sentinel://s1:26379', /must end with \/<masterName>/],
    ['redis+sentinel://s1:26379/', /must end with \/<masterName>/],
    ['redis+sentinel://s1:26379/m/abc', /<db number>/],
    ['redis+sentinel://s1:26379/m/1/2', /<db number>/],
    ['redis+cluster://', /names no host/],
    ['redis+cluster://:pw@', /names no host/],
    ['redis+cluster://n1:7000,n2', /host "n2" must be host:port/],
    ['redis+cluster://[n1]:7000', /must be host:port/],
    ['redis+cluster://:%E0%A4%A@n1:7000', /not valid percent-encoding/],
  ])('%s', (url, message) => {
    expect(() => parseRedisUrl(url)).toThrow(message);
  });

  it('an error never repeats the password', () => {
    for (const url of [
      'redis://:hunter2@[bad',
      'redis+cluster://:hunter2@n1',
      'redis+sentinel://:hunter2@s1:1',
      'redis+cluster://:hunter2%ZZ@n1:7000',
    ]) {
      let message = '';
      try {
        parseRedisUrl(url);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).not.toBe('');
      expect(message).not.toContain('hunter2');
    }
  });
});

describe('redactRedisUrl', () => {
  it.each([
    ['redis://:secret@h:6379/0', 'redis://***@h:6379/0'],
    ['redis://user:secret@h:6379', 'redis://***@h:6379'],
    ['rediss+sentinel://u:secret@s1:1,s2:2/m', 'rediss+sentinel://***@s1:1,s2:2/m'],
    ['redis+cluster://:sec@ret@n1:7000', 'redis+cluster://***@n1:7000'],
    ['redis://:se/cr@et@h:6379', 'redis://***@h:6379'],
    ['redis://h:6379', 'redis://h:6379'],
    ['not a url @ all', 'not a url @ all'],
  ])('%s is shown as %s', (url, shown) => {
    expect(redactRedisUrl(url)).toBe(shown);
  });
});
