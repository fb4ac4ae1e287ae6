// Configuration: interpolation, environment overrides, defaults, and validation that reports every
// problem at once (the real command's exit codes: test/e2e/check-config.test.ts).

import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configFlagNames, parseCommandLine, parseConfigFlags } from '../../src/config/flags.ts';
import { ConfigError, buildConfig, interpolate, loadConfig } from '../../src/config/load.ts';
import { workerCount } from '../../src/entry/workers.ts';
import { generateToken, weakTokenReason } from '../../src/model/credentials.ts';

const MASTER = generateToken();

function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError, got a valid configuration');
}

describe('interpolate', () => {
  const env = { A: 'alpha', EMPTY: '', PORT: '9000' };

  it.each([
    ['${A}', 'alpha'],
    ['x-${A}-y', 'x-alpha-y'],
    ['${A}${A}', 'alphaalpha'],
    ['${A:-fallback}', 'alpha'],
    ['${UNSET:-fallback}', 'fallback'],
    ['${EMPTY:-fallback}', 'fallback'],
    ['${UNSET:-}', ''],
    ['${UNSET}', ''],
    ['${EMPTY}', ''],
    ['${UNSET:-http://h:1/mcp}', 'http://h:1/mcp'],
    ['$A', '$A'],
    ['${1BAD}', '${1BAD}'],
    ['plain', 'plain'],
  ])('%s -> %j', (input, expected) => {
    expect(interpolate(input, env)).toBe(expected);
  });

  it('walks nested maps and lists and leaves non-strings alone', () => {
    const tree = {
      top: '${A}',
      port: 8080,
      on: true,
      nothing: null,
      nested: { list: ['${A}', '${UNSET:-d}', 3, { deep: '${PORT}' }], map: { k: '${EMPTY:-e}' } },
    };
    expect(interpolate(tree, env)).toEqual({
      top: 'alpha',
      port: 8080,
      on: true,
      nothing: null,
      nested: { list: ['alpha', 'd', 3, { deep: '9000' }], map: { k: 'e' } },
    });
    // The input is not mutated.
    expect(tree.top).toBe('${A}');
  });
});

describe('buildConfig', () => {
  it('applies the contract defaults', () => {
    const c = buildConfig({}, { BEARER_SECRET_MASTER: MASTER });
    expect(c.masterToken).toBe(MASTER);
    expect(c.store).toBe('redis');
    expect(c.redis).toMatchObject({ url: 'redis://127.0.0.1:6379', keyPrefix: 'mcpauth:' });
    expect(c.upstream.url).toBe('http://127.0.0.1:3000/mcp');
    expect(c.proxy).toMatchObject({ host: '0.0.0.0', port: 8080, publicUrl: undefined, trustedProxies: [], maxBodyBytes: 0 });
    expect(c.admin).toMatchObject({ host: '127.0.0.1', port: 8081 });
    expect(c.idp).toMatchObject({ issuer: undefined, audience: undefined, jwksUrl: undefined });
    expect(c.logLevel).toBe('info');
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.proxy)).toBe(true);
  });

  it('environment variables override the file; the file is used where the environment is silent', () => {
    const file = {
      masterToken: generateToken(),
      redis: { url: 'redis://file-redis:6379', keyPrefix: 'file:' },
      upstream: { url: 'http://file-upstream:1/mcp' },
      proxy: { host: '10.0.0.1', port: 1111, publicUrl: 'https://file.example.com' },
      admin: { host: '10.0.0.2', port: 2222 },
      logLevel: 'warn',
    };
    const env = {
      BEARER_SECRET_MASTER: MASTER,
      REDIS_URL: 'rediss://env-redis:6380',
      UPSTREAM_URL: 'https://env-upstream/mcp',
      HOST: '127.0.0.2',
      PORT: '9999',
      ADMIN_HOST: '::1',
      ADMIN_PORT: '0',
      PUBLIC_URL: 'https://env.example.com/',
      LOG_LEVEL: 'debug',
    };
    const c = buildConfig(file, env);
    expect(c.masterToken).toBe(MASTER);
    expect(c.redis.url).toBe('rediss://env-redis:6380');
    expect(c.redis.keyPrefix).toBe('file:');
    expect(c.upstream.url).toBe('https://env-upstream/mcp');
    expect(c.proxy).toMatchObject({ host: '127.0.0.2', port: 9999, publicUrl: 'https://env.example.com' });
    expect(c.admin).toMatchObject({ host: '::1', port: 0 });
    expect(c.logLevel).toBe('debug');

    // The caller's tree is not modified by the overrides.
    expect(file.redis.url).toBe('redis://file-redis:6379');
    expect(file.proxy.port).toBe(1111);
    const fileOnly = buildConfig(file, {});
    expect(fileOnly.masterToken).toBe(file.masterToken);
    expect(fileOnly.redis.url).toBe('redis://file-redis:6379');
    expect(fileOnly.proxy.port).toBe(1111);
    expect(fileOnly.logLevel).toBe('warn');
    // An empty variable counts as unset.
    expect(buildConfig(file, { PORT: '', UPSTREAM_URL: '' }).proxy.port).toBe(1111);
  });

  it('IDP_* set together enable the exchange', () => {
    const c = buildConfig(
      {},
      { BEARER_SECRET_MASTER: MASTER, IDP_ISSUER: 'https://idp/', IDP_AUDIENCE: 'mcp', IDP_JWKS_URL: 'https://idp/jwks' },
    );
    expect(c.idp).toMatchObject({ issuer: 'https://idp/', audience: 'mcp', jwksUrl: 'https://idp/jwks' });
  });

  it('reports every problem at once', () => {
    const problems = problemsOf(() =>
      buildConfig(
        {},
        { BEARER_SECRET_MASTER: 'bad', UPSTREAM_URL: 'ftp://h/mcp', LOG_LEVEL: 'verbose', REDIS_URL: 'http://127.0.0.1:6379' },
      ),
    );
    expect(problems).toHaveLength(4);
    expect(problems.some((p) => /BEARER_SECRET_MASTER/.test(p))).toBe(true);
    expect(problems.some((p) => /UPSTREAM_URL/.test(p) && /http:\/\/ or https:\/\//.test(p))).toBe(true);
    expect(problems.some((p) => /LOG_LEVEL/.test(p) && p.includes('verbose'))).toBe(true);
    expect(problems.some((p) => /REDIS_URL/.test(p) && p.includes('redis://'))).toBe(true);
  });

  it('the ConfigError message lists each problem on its own line', () => {
    try {
      buildConfig({}, { LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const e = err as ConfigError;
      expect(e.problems).toHaveLength(2);
      for (const p of e.problems) expect(e.message).toContain(`  - ${p}`);
    }
  });

  it.each([
    ['missing', undefined, /BEARER_SECRET_MASTER is not set/],
    ['empty', '', /BEARER_SECRET_MASTER is not set/],
    ['uppercase', MASTER.toUpperCase().replace(/^[0-9]/, 'A'), /exactly 64 lowercase hex.*64 characters and uppercase letters/],
    ['63 characters', MASTER.slice(1), /exactly 64 lowercase hex.*has 63 characters/],
    ['65 characters', `${MASTER}a`, /has 65 characters/],
    ['non-hex', 'g'.repeat(64), /exactly 64 lowercase hex/],
  ])('master token %s is reported clearly', (_label, value, pattern) => {
    const env = value === undefined ? {} : { BEARER_SECRET_MASTER: value };
    const problems = problemsOf(() => buildConfig({}, env));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(pattern);
    // The secret itself never appears in the message.
    if (value) expect(problems[0]).not.toContain(value);
  });

  it.each([
    ['not a URL', 'not a url', /UPSTREAM_URL "not a url" is not a valid URL/],
    ['ftp:', 'ftp://h/mcp', /UPSTREAM_URL must be an http:\/\/ or https:\/\/ URL \(got ftp:\)/],
    ['no path', 'http://127.0.0.1:3000', /UPSTREAM_URL must name the MCP endpoint path/],
    ['root path', 'http://127.0.0.1:3000/', /UPSTREAM_URL must name the MCP endpoint path/],
    ['credentials', 'http://u:p@h/mcp', /UPSTREAM_URL must not carry credentials/],
  ])('UPSTREAM_URL %s is rejected', (_label, value, pattern) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, UPSTREAM_URL: value }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(pattern);
  });

  it.each(['http://127.0.0.1:6379', 'tcp://h:1', 'localhost:6379', 'mysql://user:hunter2@db:3306'])(
    'REDIS_URL %s (bad scheme) is rejected',
    (value) => {
      const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, REDIS_URL: value }));
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/^REDIS_URL .*must start with redis:\/\//);
      expect(problems[0]).not.toContain('hunter2');
    },
  );

  it.each([
    'redis://127.0.0.1:6379',
    'rediss://user:pw@redis.example.com:6380/2',
    'redis+sentinel://s1:26379,s2:26379/mymaster',
    'redis+cluster://n1:7000,n2:7001',
  ])('REDIS_URL %s is accepted', (value) => {
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER, REDIS_URL: value }).redis.url).toBe(value);
  });

  it.each<[string, Record<string, string>]>([
    ['issuer and audience', { IDP_ISSUER: 'https://idp/', IDP_AUDIENCE: 'mcp' }],
    ['jwks only', { IDP_JWKS_URL: 'https://idp/jwks' }],
  ])('IDP variables partially set (%s) is a problem', (_label, idpEnv) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, ...idpEnv }));
    expect(problems).toEqual(['IDP_ISSUER, IDP_AUDIENCE and IDP_JWKS_URL must be set together (or none of them)']);
  });

  it.each([
    ['issuer only', { IDP_ISSUER: 'https://idp/' }, 'IDP_ISSUER is set alone'],
    [
      'a sign-in client id without its secret',
      { IDP_ISSUER: 'https://idp/', IDP_CLIENT_ID: 'mcp' },
      'IDP_ISSUER, IDP_CLIENT_ID and IDP_CLIENT_SECRET must be set together',
    ],
    [
      'a sign-in client without an issuer',
      { IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's' },
      'IDP_ISSUER, IDP_CLIENT_ID and IDP_CLIENT_SECRET must be set together',
    ],
    [
      'a plain-http issuer off loopback',
      { IDP_ISSUER: 'http://idp.example/', IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's' },
      'IDP_ISSUER must be an https:// URL',
    ],
    [
      'a plain-http issuer on a private address',
      { IDP_ISSUER: 'http://10.0.0.5:8080/', IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's' },
      'IDP_ISSUER must be an https:// URL',
    ],
    [
      'a plain-http issuer on a subdomain of localhost',
      { IDP_ISSUER: 'http://idp.localhost/', IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's' },
      'IDP_ISSUER must be an https:// URL',
    ],
    [
      'IDP_SCOPES without openid',
      { IDP_ISSUER: 'https://idp/', IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's', IDP_SCOPES: 'email profile' },
      'IDP_SCOPES must include openid',
    ],
  ])('browser sign-in settings: %s is a problem', (_label, idpEnv, problem) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, ...idpEnv }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(problem);
  });

  it.each<[string, Record<string, string>, string]>([
    [
      'IDP_ID_JAG without an issuer',
      { IDP_ID_JAG: 'true', IDP_JWKS_URL: 'https://idp.example/keys' },
      'idp.idJag (IDP_ID_JAG) is true but IDP_ISSUER and IDP_JWKS_URL are not both set',
    ],
    [
      'IDP_ID_JAG without keys',
      { IDP_ID_JAG: 'true', IDP_ISSUER: 'https://idp.example' },
      'idp.idJag (IDP_ID_JAG) is true but IDP_ISSUER and IDP_JWKS_URL are not both set',
    ],
    ['IDP_ID_JAG alone', { IDP_ID_JAG: 'true' }, 'idp.idJag (IDP_ID_JAG) is true but IDP_ISSUER and IDP_JWKS_URL are not both set'],
  ])('identity assertion grants: %s is one problem', (_label, idpEnv, problem) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, ...idpEnv }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(problem);
  });

  it('identity assertion grants with an issuer and keys alone (no audience) are a valid configuration, the exchange stays off', () => {
    const config = buildConfig(
      {},
      { BEARER_SECRET_MASTER: MASTER, IDP_ID_JAG: 'true', IDP_ISSUER: 'https://idp.example', IDP_JWKS_URL: 'https://idp.example/keys' },
    );
    expect(config.idp).toMatchObject({
      idJag: true,
      issuer: 'https://idp.example',
      jwksUrl: 'https://idp.example/keys',
      audience: undefined,
    });
  });

  it.each<[string, Record<string, string>, string]>([
    ['PUBLIC_URL', { PUBLIC_URL: 'https://mcp.example.com', IDP_AUDIENCE: 'https://mcp.example.com' }, 'https://mcp.example.com'],
    [
      'PUBLIC_URL, one with a trailing slash',
      { PUBLIC_URL: 'https://mcp.example.com', IDP_AUDIENCE: 'https://mcp.example.com/' },
      'https://mcp.example.com',
    ],
    ['the default issuer (no PUBLIC_URL)', { PORT: '8080', IDP_AUDIENCE: 'http://localhost:8080' }, 'http://localhost:8080'],
  ])('IDP_AUDIENCE equal to the issuer (%s) while ID-JAG is on is one problem naming both keys', (_label, env, issuer) => {
    const problems = problemsOf(() =>
      buildConfig(
        {},
        {
          BEARER_SECRET_MASTER: MASTER,
          IDP_ID_JAG: 'true',
          IDP_ISSUER: 'https://idp.example',
          IDP_JWKS_URL: 'https://idp.example/keys',
          ...env,
        },
      ),
    );
    expect(problems).toEqual([
      `IDP_AUDIENCE (idp.audience) equals this authorization server's issuer PUBLIC_URL (proxy.publicUrl) ${issuer} while IDP_ID_JAG (idp.idJag) is true: identity assertion grants (ID-JAGs) are issued for that audience, and the token exchange must not accept them. Give the token exchange its own audience, or turn idp.idJag off`,
    ]);
  });

  it('IDP_AUDIENCE equal to PUBLIC_URL with ID-JAG off, or another audience with it on, is valid', () => {
    const base = {
      BEARER_SECRET_MASTER: MASTER,
      PUBLIC_URL: 'https://mcp.example.com',
      IDP_ISSUER: 'https://idp.example',
      IDP_JWKS_URL: 'https://idp.example/keys',
    };
    expect(buildConfig({}, { ...base, IDP_AUDIENCE: 'https://mcp.example.com' }).idp.audience).toBe('https://mcp.example.com');
    expect(buildConfig({}, { ...base, IDP_ID_JAG: 'true', IDP_AUDIENCE: 'mcp-token-exchange' }).idp).toMatchObject({
      idJag: true,
      audience: 'mcp-token-exchange',
    });
  });

  it('browser sign-in alone (issuer, client id, secret) is a valid configuration, exchange stays off', () => {
    const config = buildConfig(
      {},
      { BEARER_SECRET_MASTER: MASTER, IDP_ISSUER: 'https://idp.example/', IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's3cret' },
    );
    expect(config.idp).toMatchObject({
      issuer: 'https://idp.example/',
      clientId: 'mcp',
      clientSecret: 's3cret',
      scopes: 'openid email profile',
      audience: undefined,
    });
  });

  it.each(['http://127.0.0.1:8080/', 'http://127.0.0.2:8080/', 'http://localhost/', 'http://[::1]:8080/'])(
    'browser sign-in over plain http on the loopback host %s is valid',
    (issuer) => {
      expect(
        buildConfig({}, { BEARER_SECRET_MASTER: MASTER, IDP_ISSUER: issuer, IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's' }).idp.issuer,
      ).toBe(issuer);
    },
  );

  it.each(['verbose', 'INFO', 'trace', 'warning'])('LOG_LEVEL %s is rejected', (level) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, LOG_LEVEL: level }));
    expect(problems).toEqual([`LOG_LEVEL must be one of debug, info, warn, error (got "${level}")`]);
  });

  it('trustedProxies accepts IPs and CIDRs (v4 and v6), as a list or a comma string', () => {
    const list = ['10.0.0.0/8', '192.168.1.1', '::1', 'fd00::/64', '0.0.0.0/0', '2001:db8::/128'];
    expect(buildConfig({ proxy: { trustedProxies: list } }, { BEARER_SECRET_MASTER: MASTER }).proxy.trustedProxies).toEqual(list);
    expect(
      buildConfig({ proxy: { trustedProxies: '10.0.0.1, 10.0.0.0/24' } }, { BEARER_SECRET_MASTER: MASTER }).proxy.trustedProxies,
    ).toEqual(['10.0.0.1', '10.0.0.0/24']);
  });

  it('trustedProxies reports every invalid entry', () => {
    const bad = ['10.0.0.0/33', 'not-an-ip', '10.0.0.0/x', '::/129', '10.0.0.0/', '10.0.0.256', 'example.com/8'];
    const problems = problemsOf(() => buildConfig({ proxy: { trustedProxies: ['10.0.0.1', ...bad] } }, { BEARER_SECRET_MASTER: MASTER }));
    expect(problems).toEqual(bad.map((e) => `proxy.trustedProxies entry "${e}" is not an IP address or CIDR`));
    expect(problemsOf(() => buildConfig({ proxy: { trustedProxies: [1, 2] } }, { BEARER_SECRET_MASTER: MASTER }))).toEqual([
      'proxy.trustedProxies must be a list of strings',
    ]);
  });

  it.each([
    ['PORT', '70000', /^PORT must be an integer from 0 to 65535/],
    ['PORT', 'http', /^PORT must be an integer/],
    ['ADMIN_PORT', '-1', /^ADMIN_PORT must be an integer from 0 to 65535/],
    ['PUBLIC_URL', 'example.com', /PUBLIC_URL "example.com" is not a valid URL/],
  ])('%s=%s is rejected', (name, value, pattern) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, [name]: value }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(pattern);
  });

  it('a section that is not a mapping is a problem', () => {
    expect(problemsOf(() => buildConfig({ redis: 'redis://x:1' }, { BEARER_SECRET_MASTER: MASTER }))).toEqual(['redis must be a mapping']);
  });

  it('refresh reuse grace: 5 minutes by default (parallel sessions), 0 turns it off, at most an hour, from the environment too', () => {
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER }).oauth.refreshReuseGraceSeconds).toBe(300);
    expect(buildConfig({ oauth: { refreshReuseGraceSeconds: 0 } }, { BEARER_SECRET_MASTER: MASTER }).oauth.refreshReuseGraceSeconds).toBe(
      0,
    );
    expect(
      buildConfig({}, { BEARER_SECRET_MASTER: MASTER, OAUTH_REFRESH_REUSE_GRACE_SECONDS: '3600' }).oauth.refreshReuseGraceSeconds,
    ).toBe(3600);
    expect(problemsOf(() => buildConfig({ oauth: { refreshReuseGraceSeconds: 3601 } }, { BEARER_SECRET_MASTER: MASTER }))).toEqual([
      'oauth.refreshReuseGraceSeconds must be an integer from 0 to 3600 (got 3601)',
    ]);
  });

  it('token lookup cache: auto by default (Cluster included); tracking on standalone, Sentinel and Cluster', () => {
    const env = { BEARER_SECRET_MASTER: MASTER };
    const auto = buildConfig({}, env).redis;
    expect([auto.lookupCache, auto.lookupCacheMaxEntries, auto.lookupCachePingIntervalMs]).toEqual(['auto', 100000, 1000]);
    expect(buildConfig({ redis: { url: 'redis+cluster://n1:7000,n2:7001' } }, env).redis.lookupCache).toBe('auto');
    expect(buildConfig({}, { ...env, REDIS_LOOKUP_CACHE: 'off' }).redis.lookupCache).toBe('off');
    const fromEnv = buildConfig({}, { ...env, REDIS_LOOKUP_CACHE: 'tracking', REDIS_LOOKUP_CACHE_MAX_ENTRIES: '500' }).redis;
    expect([fromEnv.lookupCache, fromEnv.lookupCacheMaxEntries]).toEqual(['tracking', 500]);
    expect(
      buildConfig({ redis: { url: 'redis+sentinel://s1:26379,s2:26379/mymaster', lookupCache: 'tracking' } }, env).redis.lookupCache,
    ).toBe('tracking');
    // On Cluster the cache tracks on every master (src/store/redis-cluster-lookup-cache.ts).
    expect(buildConfig({ redis: { url: 'redis+cluster://n1:7000,n2:7001', lookupCache: 'tracking' } }, env).redis.lookupCache).toBe(
      'tracking',
    );
    // The memory store has no Redis to track: the key is ignored there.
    expect(buildConfig({ store: 'memory', redis: { url: 'redis+cluster://n1:7000', lookupCache: 'tracking' } }, env).store).toBe('memory');
    expect(problemsOf(() => buildConfig({ redis: { lookupCache: 'yes', lookupCacheMaxEntries: 0 } }, env))).toEqual([
      'redis.lookupCache must be one of auto, off, tracking (got "yes")',
      'redis.lookupCacheMaxEntries must be an integer from 1 to 10000000 (got 0)',
    ]);
  });

  it('client metadata documents: on by default with the SSRF guard on; a nested section, validated like the others', () => {
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER }).oauth.clientMetadataDocuments).toEqual({
      enabled: true,
      timeoutMs: 5000,
      maxBytes: 5120,
      cacheTtlSeconds: 600,
      failureCacheSeconds: 30,
      keySetRefetchCooldownSeconds: 30,
      cacheMaxEntries: 1000,
      fetchesPerMinutePerAddress: 20,
      maxConcurrentFetches: 16,
      maxConcurrentFetchesPerAddress: 4,
      allowPrivateAddresses: false,
    });
    const set = buildConfig(
      { oauth: { clientMetadataDocuments: { enabled: 'false', allowPrivateAddresses: true } } },
      { BEARER_SECRET_MASTER: MASTER },
    );
    expect(set.oauth.clientMetadataDocuments).toMatchObject({ enabled: false, allowPrivateAddresses: true });
    expect(
      problemsOf(() =>
        buildConfig({ oauth: { clientMetadataDocuments: { timeoutMs: 5, maxBytes: 'big' } } }, { BEARER_SECRET_MASTER: MASTER }),
      ),
    ).toEqual([
      'oauth.clientMetadataDocuments.timeoutMs must be an integer from 100 to 60000 (got 5)',
      'oauth.clientMetadataDocuments.maxBytes must be an integer from 512 to 1048576 (got "big")',
    ]);
    expect(problemsOf(() => buildConfig({ oauth: { clientMetadataDocuments: true } }, { BEARER_SECRET_MASTER: MASTER }))).toEqual([
      'oauth.clientMetadataDocuments must be a mapping',
    ]);
  });
});

describe('loadConfig', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-config-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('a missing file is a ConfigError naming the path', () => {
    const path = join(dir, 'does-not-exist.yaml');
    const problems = problemsOf(() => loadConfig(path, { BEARER_SECRET_MASTER: MASTER }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`cannot read config file ${path}`);
    expect(problems[0]).toContain('ENOENT');
  });

  it('invalid YAML is a ConfigError naming the path', () => {
    const path = join(dir, 'broken.yaml');
    writeFileSync(path, 'proxy:\n  port: [8080\n  host: "unterminated\n');
    const problems = problemsOf(() => loadConfig(path, { BEARER_SECRET_MASTER: MASTER }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`config file ${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is not valid YAML`));
  });

  it('a YAML list at the top is not a mapping', () => {
    const path = join(dir, 'list.yaml');
    writeFileSync(path, '- a\n- b\n');
    expect(problemsOf(() => loadConfig(path, { BEARER_SECRET_MASTER: MASTER }))).toEqual([
      `config file ${path} must contain a YAML mapping`,
    ]);
  });

  it('interpolates the file from the environment, and the environment still overrides', () => {
    const path = join(dir, 'ok.yaml');
    writeFileSync(
      path,
      [
        'masterToken: ${MY_MASTER}',
        'upstream:',
        '  url: ${UP:-http://default-up:3000/mcp}',
        'proxy:',
        '  port: ${MY_PORT:-7000}',
        'logLevel: warn',
        '',
      ].join('\n'),
    );
    const c = loadConfig(path, { MY_MASTER: MASTER, MY_PORT: '7100' });
    expect(c.masterToken).toBe(MASTER);
    expect(c.upstream.url).toBe('http://default-up:3000/mcp');
    expect(c.proxy.port).toBe(7100);
    expect(c.logLevel).toBe('warn');
    expect(loadConfig(path, { MY_MASTER: MASTER, PORT: '7200', LOG_LEVEL: 'error' })).toMatchObject({
      proxy: { port: 7200 },
      logLevel: 'error',
    });
  });

  it('an empty file means all defaults', () => {
    const path = join(dir, 'empty.yaml');
    writeFileSync(path, '');
    expect(loadConfig(path, { BEARER_SECRET_MASTER: MASTER }).proxy.port).toBe(8080);
  });
});

describe('keys named as the user wrote them', () => {
  it('a file key by its dotted name, a variable by its name, a flag by its flag', () => {
    expect(problemsOf(() => buildConfig({ proxy: { port: 70000 } }, { BEARER_SECRET_MASTER: MASTER }))).toEqual([
      'proxy.port must be an integer from 0 to 65535 (got 70000)',
    ]);
    expect(problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, PORT: '70000' }))).toEqual([
      'PORT must be an integer from 0 to 65535 (got "70000")',
    ]);
    expect(problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER }, new Map([['proxy.port', '70000']])))).toEqual([
      '--proxy.port must be an integer from 0 to 65535 (got "70000")',
    ]);
  });
});

describe('unknown keys', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['prot', { prot: 8080 }, 'unknown key "prot" (did you mean "proxy"?)'],
    ['upsteam', { upsteam: { url: 'http://h:1/mcp' } }, 'unknown key "upsteam" (did you mean "upstream"?)'],
    ['redis.uri', { redis: { uri: 'redis://h:1' } }, 'unknown key "redis.uri" (did you mean "redis.url"?)'],
    ['redis.uri as one key', { 'redis.uri': 'redis://h:1' }, 'unknown key "redis.uri" (did you mean "redis.url"?)'],
    ['proxy.prot', { proxy: { prot: 1 } }, 'unknown key "proxy.prot" (did you mean "proxy.port"?)'],
    ['snake case', { proxy: { public_url: 'https://x' } }, 'unknown key "proxy.public_url" (did you mean "proxy.publicUrl"?)'],
    ['key in the wrong section', { proxy: { keyPrefix: 'x:' } }, 'unknown key "proxy.keyPrefix" (did you mean "redis.keyPrefix"?)'],
    [
      'nothing near',
      { proxy: { zzzzzzzzzz: 1 } },
      'unknown key "proxy.zzzzzzzzzz" (the keys of proxy: host, port, publicUrl, allowedHosts, allowedOrigins, trustedProxies, forwardAuth, forwardAuthLogAllowed, maxBodyBytes, maxHeaderBytes, headersTimeoutMs, requestTimeoutMs, shutdownGraceMs, workers, handleIdleMs, streamRecheckMs)',
    ],
  ])('%s is an error naming the key and the nearest known one', (_label, tree, problem) => {
    expect(problemsOf(() => buildConfig(tree, { BEARER_SECRET_MASTER: MASTER }))).toEqual([problem]);
  });

  it('is reported with every other problem', () => {
    const problems = problemsOf(() => buildConfig({ prot: 1, redis: { uri: 'x' }, logLevel: 'loud' }, { BEARER_SECRET_MASTER: MASTER }));
    expect(problems).toHaveLength(3);
    expect(problems).toContain('logLevel must be one of debug, info, warn, error (got "loud")');
  });
});

describe('command-line flags', () => {
  it('every key but the master token is a flag, and a flag wins over the environment and the file', () => {
    const { flags, problems } = parseConfigFlags(['--proxy.port', '9001', '--logLevel=error', '--proxy.trustedProxies', '10.0.0.0/8,::1']);
    expect(problems).toEqual([]);
    const c = buildConfig({ proxy: { port: 1 }, logLevel: 'warn' }, { BEARER_SECRET_MASTER: MASTER, PORT: '2', LOG_LEVEL: 'debug' }, flags);
    expect(c.proxy.port).toBe(9001);
    expect(c.logLevel).toBe('error');
    expect(c.proxy.trustedProxies).toEqual(['10.0.0.0/8', '::1']);
    expect(configFlagNames()).toContain('upstream.url');
    expect(configFlagNames()).not.toContain('masterToken');
  });

  it.each([
    [['--masterToken', MASTER], /^--masterToken: a secret is never taken from a flag/],
    [['--proxy.prot', '9'], /^unknown argument "--proxy.prot" \(did you mean --proxy.port\?\)$/],
    [['--logLevl=info'], /^unknown argument "--logLevl=info" \(did you mean --logLevel\?\)$/],
    [['--proxy.port'], /^--proxy.port needs a value$/],
    [['stray'], /^unknown argument "stray"$/],
    // A value that starts with -- is the next flag, not this one's value.
    [['--proxy.port', '--logLevel=info'], /^--proxy.port needs a value$/],
    [['--proxy.prot=9', '--logLevel', 'info'], /^unknown argument "--proxy.prot=9" \(did you mean --proxy.port\?\)$/],
  ])('%j is one clear problem', (argv, pattern) => {
    const { problems } = parseConfigFlags(argv);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(pattern);
    expect(problems[0]).not.toContain(MASTER);
  });
});

describe('the sidecar command line', () => {
  it('reads its own flags with the keys, in either form', () => {
    expect(parseCommandLine(['--config=x.yaml', '--check-config', '--skip-network-checks', '--proxy.port', '0'])).toEqual({
      configPath: 'x.yaml',
      checkOnly: true,
      skipNetworkChecks: true,
      help: false,
      flags: new Map([['proxy.port', '0']]),
      problems: [],
    });
    expect(parseCommandLine(['--config', 'y.yaml']).configPath).toBe('y.yaml');
    expect(parseCommandLine(['-h']).help).toBe(true);
  });

  it.each([
    [['--config'], '--config needs a file path'],
    [['--config', '--check-config'], '--config needs a file path'],
    [['--check-config=yes'], '--check-config takes no value'],
    [['--check-confg'], 'unknown argument "--check-confg" (did you mean --check-config?)'],
  ])('%j is one clear problem', (argv, problem) => {
    expect(parseCommandLine(argv).problems).toEqual([problem]);
  });
});

describe('PUBLIC_URL is a base URL', () => {
  it.each([
    ['https://mcp.example.com/', 'https://mcp.example.com'],
    ['https://mcp.example.com///', 'https://mcp.example.com'],
    ['https://gw.example.com/team-a/', 'https://gw.example.com/team-a'],
    ['https://gw.example.com/mcp-team', 'https://gw.example.com/mcp-team'],
  ])('%s is used as %s', (value, expected) => {
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER, PUBLIC_URL: value }).proxy.publicUrl).toBe(expected);
  });

  it.each([
    ['https://mcp.example.com/mcp', /^PUBLIC_URL is the base URL, without \/mcp .*use https:\/\/mcp.example.com$/],
    ['https://mcp.example.com/mcp/', /^PUBLIC_URL is the base URL, without \/mcp .*use https:\/\/mcp.example.com$/],
    ['https://gw.example.com/team/MCP', /^PUBLIC_URL is the base URL, without \/mcp .*use https:\/\/gw.example.com\/team$/],
    ['https://mcp.example.com/?x=1', /^PUBLIC_URL must be a base URL without a query or fragment/],
    ['https://mcp.example.com#top', /^PUBLIC_URL must be a base URL without a query or fragment/],
  ])('%s is refused with a hint', (value, pattern) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, PUBLIC_URL: value }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(pattern);
  });
});

describe('a master token that is clearly not random', () => {
  it.each([
    ['all zeros', '0'.repeat(64), /only 1 different hex digit /],
    ['one repeated letter', 'a'.repeat(64), /only 1 different hex digit /],
    ['two digits', 'ab'.repeat(32), /only 2 different hex digits/],
    ['deadbeef', 'deadbeef'.repeat(8), /only 5 different hex digits/],
    ['0-f repeated', '0123456789abcdef'.repeat(4), /16-character pattern repeated/],
    ['a random half twice', generateToken().slice(0, 32).repeat(2), /32-character pattern repeated/],
  ])('%s is refused, with the rule and how to generate one, never the value', (_label, token, reason) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: token }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^BEARER_SECRET_MASTER is not a random secret: /);
    expect(problems[0]).toMatch(reason);
    expect(problems[0]).toContain('token generate');
    expect(problems[0]).not.toContain(token);
  });

  it('random tokens pass', () => {
    for (let i = 0; i < 500; i++) expect(weakTokenReason(generateToken())).toBeUndefined();
  });
});

describe('an upstream that is the sidecar itself', () => {
  it.each<[string, Record<string, string>]>([
    ['127.0.0.1 on the default wildcard listener', { UPSTREAM_URL: 'http://127.0.0.1:8080/mcp' }],
    ['localhost', { UPSTREAM_URL: 'http://localhost:8080/mcp' }],
    ['::1', { UPSTREAM_URL: 'http://[::1]:8080/mcp' }],
    ['0.0.0.0', { UPSTREAM_URL: 'http://0.0.0.0:8080/mcp' }],
    ['the default port of http', { UPSTREAM_URL: 'http://localhost/mcp', PORT: '80' }],
    ['a loopback listener', { UPSTREAM_URL: 'http://localhost:9000/mcp', HOST: '127.0.0.1', PORT: '9000' }],
    ['another loopback address on a loopback listener', { UPSTREAM_URL: 'http://127.0.0.2:9000/mcp', HOST: '127.0.0.1', PORT: '9000' }],
    ['the listener address itself', { UPSTREAM_URL: 'http://10.1.2.3:9000/mcp', HOST: '10.1.2.3', PORT: '9000' }],
    ['under PUBLIC_URL', { UPSTREAM_URL: 'https://mcp.example.com/mcp', PUBLIC_URL: 'https://mcp.example.com' }],
  ])('%s is refused', (_label, env) => {
    const problems = problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, ...env }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^UPSTREAM_URL .*requests would loop/);
  });

  it.each<[string, Record<string, string>]>([
    ['another port', { UPSTREAM_URL: 'http://127.0.0.1:8081/mcp' }],
    ['another host than the listener', { UPSTREAM_URL: 'http://127.0.0.1:9000/mcp', HOST: '10.1.2.3', PORT: '9000' }],
    ['a port-0 listener', { UPSTREAM_URL: 'http://127.0.0.1:8080/mcp', PORT: '0' }],
    ['a remote host', { UPSTREAM_URL: 'http://mcp-server.internal:8080/mcp' }],
    ['another origin than PUBLIC_URL', { UPSTREAM_URL: 'https://upstream.example.com/mcp', PUBLIC_URL: 'https://mcp.example.com' }],
  ])('%s is accepted', (_label, env) => {
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER, ...env }).upstream.url).toBe(env.UPSTREAM_URL);
  });
});

describe('proxy.workers', () => {
  it('defaults to 1 (one process, no cluster) and reads WORKERS', () => {
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER }).proxy.workers).toBe(1);
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER, WORKERS: '0' }).proxy.workers).toBe(0);
    expect(buildConfig({}, { BEARER_SECRET_MASTER: MASTER, WORKERS: '4' }).proxy.workers).toBe(4);
  });

  it('WORKERS=0 is one process per CPU, at most 64, however many CPUs the machine has', () => {
    const perCpu = buildConfig({}, { BEARER_SECRET_MASTER: MASTER, WORKERS: '0' });
    expect(workerCount(perCpu, 2)).toBe(2);
    expect(workerCount(perCpu, 64)).toBe(64);
    expect(workerCount(perCpu, 192)).toBe(64);
    expect(workerCount(buildConfig({}, { BEARER_SECRET_MASTER: MASTER, WORKERS: '3' }), 192)).toBe(3);
  });

  it.each(['-1', '65', '1.5'])('refuses WORKERS=%s', (value) => {
    expect(problemsOf(() => buildConfig({}, { BEARER_SECRET_MASTER: MASTER, WORKERS: value })).join('\n')).toContain('WORKERS');
  });

  it.each(['2', '0'])('refuses WORKERS=%s with the memory store: each process would hold its own tokens', (value) => {
    const problems = problemsOf(() => buildConfig({ store: 'memory' }, { BEARER_SECRET_MASTER: MASTER, WORKERS: value }));
    expect(problems).toEqual([expect.stringContaining(`WORKERS ${value} needs the Redis store`)]);
    expect(buildConfig({ store: 'memory' }, { BEARER_SECRET_MASTER: MASTER, WORKERS: '1' }).proxy.workers).toBe(1);
  });
});

describe('the caller assertion keys (upstream.assertion*)', () => {
  const p256 = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
  const pem = p256.export({ format: 'pem', type: 'pkcs8' }).toString();
  const sec1 = p256.export({ format: 'pem', type: 'sec1' }).toString();
  const jwk = JSON.stringify(p256.export({ format: 'jwk' }));
  const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const base = { masterToken: MASTER };
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'assertion-key-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['a PKCS #8 PEM', pem],
    ['a SEC 1 PEM', sec1],
    ['a private JWK', jwk],
  ])('%s from UPSTREAM_ASSERTION_KEY is taken', (_name, key) => {
    const config = buildConfig(base, { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_KEY: key });
    expect(config.upstream.assertion).toBe(true);
    expect(config.upstream.assertionKey).toBe(key);
  });

  it('a key file is read; the defaults are 60 s and a day', () => {
    const file = join(dir, 'key.pem');
    writeFileSync(file, pem);
    const config = buildConfig({ ...base, upstream: { assertion: true, assertionKeyFile: file } }, {});
    expect(config.upstream).toMatchObject({ assertionKeyFile: file, assertionLifetimeSeconds: 60, assertionKeyRotationSeconds: 86400 });
  });

  it.each([
    [
      'not a key',
      { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_KEY: 'hunter2-not-a-key' },
      'UPSTREAM_ASSERTION_KEY: not a readable private key',
    ],
    [
      'a P-384 key',
      { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_KEY: p384 },
      'UPSTREAM_ASSERTION_KEY: must be an EC P-256 private key (ES256)',
    ],
    [
      'a public key',
      { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_KEY: createPublicKey(p256).export({ format: 'pem', type: 'spki' }).toString() },
      'not a readable private key',
    ],
    ['a key with assertions off', { UPSTREAM_ASSERTION_KEY: pem }, 'is set but upstream.assertion (UPSTREAM_ASSERTION) is not true'],
    [
      'both a key and a file',
      { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_KEY: pem, UPSTREAM_ASSERTION_KEY_FILE: '/nonexistent' },
      'give the assertion signing key once',
    ],
    [
      'an unreadable file',
      { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_KEY_FILE: '/nonexistent/key.pem' },
      'UPSTREAM_ASSERTION_KEY_FILE "/nonexistent/key.pem" cannot be read (ENOENT)',
    ],
    [
      'a lifetime over 300 s',
      { UPSTREAM_ASSERTION: 'true', UPSTREAM_ASSERTION_LIFETIME_SECONDS: '301' },
      'UPSTREAM_ASSERTION_LIFETIME_SECONDS must be an integer from 10 to 300',
    ],
  ])('%s is a problem that never quotes the key', (_name, env, expected) => {
    const problems = problemsOf(() => buildConfig(base, env));
    expect(problems.join('\n')).toContain(expected);
    const text = problems.join('\n');
    for (const secret of [pem.split('\n')[1]!, JSON.parse(jwk).d as string, p384.split('\n')[1]!, 'hunter2'])
      expect(text).not.toContain(secret);
  });
});
