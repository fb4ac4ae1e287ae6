// The demo's configuration: the same flags, config file and environment as npm start, except the
// keys that make it the demo (its store, upstream and identity provider), which it keeps.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, type Config } from '../../src/config/load.ts';
import { demoConfig, type DemoConfigInput } from '../../demo/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'demo-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const GENERATED = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f91';
const IDP = { issuer: 'http://127.0.0.1:4455', clientId: 'mcp-bearer-proxy-demo', clientSecret: 'b'.repeat(64) };

function config(argv: string[], env: NodeJS.ProcessEnv = {}, extra: Partial<DemoConfigInput> = {}): Config {
  const c = demoConfig({ argv, env, upstreamUrl: 'http://127.0.0.1:4000/mcp', idp: IDP, generatedMasterToken: GENERATED, ...extra });
  if (c === 'help') throw new Error('help');
  return c;
}

function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  throw new Error('no ConfigError');
}

describe('demo configuration', () => {
  it('without flags: the demo store, upstream and identity provider, loopback listeners, a generated master token', () => {
    const c = config([]);
    expect(c.store).toBe('memory');
    expect(c.upstream.url).toBe('http://127.0.0.1:4000/mcp');
    expect(c.idp.issuer).toBe(IDP.issuer);
    expect(c.proxy.host).toBe('127.0.0.1');
    expect(c.admin.host).toBe('127.0.0.1');
    expect(c.masterToken).toBe(GENERATED);
    expect(c.logLevel).toBe('warn');
  });

  it('flags as for npm start: token lifetimes and the refresh grace window, so a newcomer can try refresh after expiry', () => {
    const c = config([
      '--oauth.profiles.interactive.accessTokenLifetimeSeconds',
      '60',
      '--oauth.refreshReuseGraceSeconds=30',
      '--proxy.port',
      '0',
    ]);
    expect(c.oauth.profiles.interactive.accessTokenLifetimeSeconds).toBe(60);
    expect(c.oauth.refreshReuseGraceSeconds).toBe(30);
    expect(c.proxy.port).toBe(0);
  });

  it('the environment as for npm start; a flag wins over it', () => {
    expect(config([], { OAUTH_REFRESH_REUSE_GRACE_SECONDS: '45', PORT: '9090', LOG_LEVEL: 'info' })).toMatchObject({
      oauth: { refreshReuseGraceSeconds: 45 },
      proxy: { port: 9090 },
      logLevel: 'info',
    });
    expect(
      config(['--oauth.refreshReuseGraceSeconds', '10'], { OAUTH_REFRESH_REUSE_GRACE_SECONDS: '45' }).oauth.refreshReuseGraceSeconds,
    ).toBe(10);
    const fromEnv = 'c'.repeat(16) + 'd'.repeat(16) + '0123456789abcdef'.repeat(2);
    expect(config([], { BEARER_SECRET_MASTER: fromEnv }).masterToken).toBe(fromEnv);
  });

  it('a config file named by --config or $MCP_AUTH_CONFIG, with ${VAR} interpolation; its store, upstream and IdP are overridden, not used', () => {
    const file = join(dir, 'demo.yaml');
    writeFileSync(
      file,
      'store: redis\nupstream:\n  url: http://10.0.0.1/mcp\nidp:\n  issuer: https://login.example.com\noauth:\n  refreshReuseGraceSeconds: ${GRACE:-20}\nproxy:\n  port: 0\n',
    );
    const c = config(['--config', file]);
    expect(c).toMatchObject({
      store: 'memory',
      upstream: { url: 'http://127.0.0.1:4000/mcp' },
      idp: { issuer: IDP.issuer },
      oauth: { refreshReuseGraceSeconds: 20 },
      proxy: { port: 0, host: '127.0.0.1' },
    });
    expect(config([], { MCP_AUTH_CONFIG: file, GRACE: '90' }).oauth.refreshReuseGraceSeconds).toBe(90);
  });

  it('never reads ./config.yaml by itself (the production template)', () => {
    // The repository's config.yaml sets store: redis and proxy.host 0.0.0.0; the tests run from the repository root.
    expect(config([])).toMatchObject({ store: 'memory', proxy: { host: '127.0.0.1' } });
  });

  it('bad input is a clear error: an unknown flag (with the nearest key), a value out of range, a flag for a key the demo decides, a missing file, --check-config', () => {
    expect(problemsOf(() => config(['--oauth.refreshReuseGraceSecond', '5']))).toEqual([
      expect.stringContaining('did you mean --oauth.refreshReuseGraceSeconds'),
    ]);
    expect(problemsOf(() => config(['--oauth.refreshReuseGraceSeconds', '99999'])).join('\n')).toMatch(/refreshReuseGraceSeconds/);
    expect(problemsOf(() => config(['--store', 'redis']))).toEqual([expect.stringContaining('--store: the demo uses its own store')]);
    expect(problemsOf(() => config(['--upstream.url', 'http://x/mcp']))).toEqual([
      expect.stringContaining('the demo uses its own upstream.url'),
    ]);
    expect(problemsOf(() => config(['--idp.issuer', 'https://x']))).toEqual([expect.stringContaining('the demo uses its own idp.issuer')]);
    expect(problemsOf(() => config(['--config', join(dir, 'missing.yaml')]))).toEqual([expect.stringContaining('cannot read config file')]);
    expect(problemsOf(() => config(['--check-config']))).toEqual([expect.stringContaining('--check-config is for npm start')]);
  });

  it('--help asks for the usage', () => {
    expect(demoConfig({ argv: ['--help'], env: {}, upstreamUrl: 'http://127.0.0.1:1/mcp', generatedMasterToken: GENERATED })).toBe('help');
  });
});
