// The upstream-credential settings: each mode accepted with what it needs, every incomplete or unused
// setting one clear problem, and no problem ever repeating a key's value.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseConfigFlags } from '../../src/config/flags.ts';
import { ConfigError, buildConfig } from '../../src/config/load.ts';
import { generateToken } from '../../src/model/credentials.ts';

const MASTER = generateToken();
const KEY = randomBytes(32).toString('hex');
const SIGN_IN = { IDP_ISSUER: 'https://idp.example/', IDP_CLIENT_ID: 'mcp', IDP_CLIENT_SECRET: 's3cret' };
const GITHUB = {
  UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT: 'https://github.com/login/oauth/authorize',
  UPSTREAM_PROVIDER_TOKEN_ENDPOINT: 'https://github.com/login/oauth/access_token',
  UPSTREAM_PROVIDER_CLIENT_ID: 'Iv1.abc',
  UPSTREAM_PROVIDER_CLIENT_SECRET: 'gh-secret',
};

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    buildConfig({}, { BEARER_SECRET_MASTER: MASTER, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError, got a valid configuration');
}

describe('upstream credentials: configuration', () => {
  it('defaults to none, header authorization, no key', () => {
    const config = buildConfig({}, { BEARER_SECRET_MASTER: MASTER });
    expect(config.upstream.credentials).toMatchObject({ mode: 'none', header: 'authorization', key: undefined, previousKeys: [] });
  });

  it.each<[string, Record<string, string>]>([
    ['idp with browser sign-in', { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN }],
    [
      'token-exchange with sign-in and an audience',
      { UPSTREAM_CREDENTIALS: 'token-exchange', UPSTREAM_CREDENTIALS_AUDIENCE: 'https://api.internal', ...SIGN_IN },
    ],
    ['oauth with explicit endpoints (GitHub)', { UPSTREAM_CREDENTIALS: 'oauth', ...GITHUB }],
    [
      'oauth with discovery',
      { UPSTREAM_CREDENTIALS: 'oauth', UPSTREAM_PROVIDER_ISSUER: 'https://accounts.example', UPSTREAM_PROVIDER_CLIENT_ID: 'c' },
    ],
    ['oauth with a display name for the provider', { UPSTREAM_CREDENTIALS: 'oauth', ...GITHUB, UPSTREAM_PROVIDER_NAME: 'GitHub' }],
    [
      'a base64 key and a url-safe base64 previous key',
      {
        UPSTREAM_CREDENTIALS: 'idp',
        ...SIGN_IN,
        UPSTREAM_CREDENTIALS_KEY: randomBytes(32).toString('base64'),
        UPSTREAM_CREDENTIALS_PREVIOUS_KEYS: `${randomBytes(32).toString('base64url')},${KEY}`,
      },
    ],
  ])('%s is valid', (_label, env) => {
    const config = buildConfig({}, { BEARER_SECRET_MASTER: MASTER, UPSTREAM_CREDENTIALS_KEY: KEY, ...env });
    expect(config.upstream.credentials.mode).toBe(env.UPSTREAM_CREDENTIALS);
  });

  it('another header name is lowercased; its value is then the raw token (docs)', () => {
    const config = buildConfig(
      {},
      {
        BEARER_SECRET_MASTER: MASTER,
        UPSTREAM_CREDENTIALS: 'oauth',
        UPSTREAM_CREDENTIALS_KEY: KEY,
        UPSTREAM_CREDENTIALS_HEADER: 'X-GitHub-Token',
        ...GITHUB,
      },
    );
    expect(config.upstream.credentials.header).toBe('x-github-token');
  });

  it.each<[string, Record<string, string>, string]>([
    [
      'a mode without a key',
      { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN },
      'UPSTREAM_CREDENTIALS is idp but UPSTREAM_CREDENTIALS_KEY (upstream.credentials.key) is not set',
    ],
    [
      'idp without browser sign-in',
      { UPSTREAM_CREDENTIALS: 'idp', UPSTREAM_CREDENTIALS_KEY: KEY },
      'UPSTREAM_CREDENTIALS is idp but browser sign-in is not configured',
    ],
    [
      'token-exchange without the IdP',
      { UPSTREAM_CREDENTIALS: 'token-exchange', UPSTREAM_CREDENTIALS_KEY: KEY, UPSTREAM_CREDENTIALS_AUDIENCE: 'api' },
      'UPSTREAM_CREDENTIALS is token-exchange but browser sign-in is not configured',
    ],
    [
      'token-exchange without an audience',
      { UPSTREAM_CREDENTIALS: 'token-exchange', UPSTREAM_CREDENTIALS_KEY: KEY, ...SIGN_IN },
      'UPSTREAM_CREDENTIALS_AUDIENCE (upstream.credentials.audience) is not set',
    ],
    [
      'oauth without a provider',
      { UPSTREAM_CREDENTIALS: 'oauth', UPSTREAM_CREDENTIALS_KEY: KEY },
      'UPSTREAM_CREDENTIALS is oauth but no provider is configured',
    ],
    [
      'oauth with an issuer and endpoints',
      { UPSTREAM_CREDENTIALS: 'oauth', UPSTREAM_CREDENTIALS_KEY: KEY, ...GITHUB, UPSTREAM_PROVIDER_ISSUER: 'https://a.example' },
      'are both set: give the issuer (discovery) or both endpoints',
    ],
    [
      'oauth with one endpoint',
      {
        UPSTREAM_CREDENTIALS: 'oauth',
        UPSTREAM_CREDENTIALS_KEY: KEY,
        UPSTREAM_PROVIDER_TOKEN_ENDPOINT: 'https://a.example/token',
        UPSTREAM_PROVIDER_CLIENT_ID: 'c',
      },
      'must be set together',
    ],
    [
      'oauth without a client id',
      { UPSTREAM_CREDENTIALS: 'oauth', UPSTREAM_CREDENTIALS_KEY: KEY, UPSTREAM_PROVIDER_ISSUER: 'https://a.example' },
      'UPSTREAM_PROVIDER_CLIENT_ID is not set',
    ],
    [
      'oauth over plain http off loopback',
      {
        UPSTREAM_CREDENTIALS: 'oauth',
        UPSTREAM_CREDENTIALS_KEY: KEY,
        UPSTREAM_PROVIDER_ISSUER: 'http://accounts.example',
        UPSTREAM_PROVIDER_CLIENT_ID: 'c',
      },
      'UPSTREAM_PROVIDER_ISSUER must be an https:// URL',
    ],
    [
      "a provider's display name with another mode",
      { UPSTREAM_CREDENTIALS: 'idp', UPSTREAM_CREDENTIALS_KEY: KEY, ...SIGN_IN, UPSTREAM_PROVIDER_NAME: 'GitHub' },
      'only oauth (connected accounts) uses a provider',
    ],
    [
      'a provider with another mode',
      { UPSTREAM_CREDENTIALS: 'idp', UPSTREAM_CREDENTIALS_KEY: KEY, ...SIGN_IN, UPSTREAM_PROVIDER_ISSUER: 'https://a.example' },
      'only oauth (connected accounts) uses a provider',
    ],
    [
      'an audience with another mode',
      { UPSTREAM_CREDENTIALS: 'idp', UPSTREAM_CREDENTIALS_KEY: KEY, ...SIGN_IN, UPSTREAM_CREDENTIALS_AUDIENCE: 'api' },
      'only token-exchange uses it',
    ],
    [
      'a key with mode none',
      { UPSTREAM_CREDENTIALS_KEY: KEY },
      'UPSTREAM_CREDENTIALS_KEY is set but UPSTREAM_CREDENTIALS (upstream.credentials.mode) is none',
    ],
    ['an unknown mode', { UPSTREAM_CREDENTIALS: 'github' }, 'UPSTREAM_CREDENTIALS must be one of none, idp, token-exchange, oauth'],
    [
      'a short hex key',
      { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN, UPSTREAM_CREDENTIALS_KEY: 'ab'.repeat(16) },
      'decodes as base64 to 24 bytes, not 32',
    ],
    [
      'a key that is neither hex nor base64',
      { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN, UPSTREAM_CREDENTIALS_KEY: 'correct horse battery staple' },
      'neither 64 hex characters nor base64 of 32 bytes',
    ],
    [
      'a bad previous key',
      { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN, UPSTREAM_CREDENTIALS_KEY: KEY, UPSTREAM_CREDENTIALS_PREVIOUS_KEYS: 'hunter2' },
      'UPSTREAM_CREDENTIALS_PREVIOUS_KEYS[0] must be 32 random bytes',
    ],
    [
      'a reserved header',
      { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN, UPSTREAM_CREDENTIALS_KEY: KEY, UPSTREAM_CREDENTIALS_HEADER: 'X-MCP-Auth-Subject' },
      'is a header the proxy sets or forwards itself',
    ],
    [
      'a header name with a space',
      { UPSTREAM_CREDENTIALS: 'idp', ...SIGN_IN, UPSTREAM_CREDENTIALS_KEY: KEY, UPSTREAM_CREDENTIALS_HEADER: 'x token' },
      'is not a valid header name',
    ],
  ])('%s is one problem, naming what to set', (_label, env, expected) => {
    const problems = problemsOf(env);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(expected);
    for (const secret of [KEY, 'hunter2', 'correct horse', 'gh-secret']) expect(problems[0]).not.toContain(secret);
  });

  it('every problem of an incomplete oauth mode is reported at once', () => {
    const problems = problemsOf({ UPSTREAM_CREDENTIALS: 'oauth' });
    expect(problems).toHaveLength(2);
    expect(problems.join('\n')).toMatch(/UPSTREAM_CREDENTIALS_KEY[\s\S]*no provider is configured/);
  });

  it.each([
    'upstream.credentials.key',
    'upstream.credentials.previousKeys',
    'upstream.credentials.serviceToken',
    'upstream.credentials.provider.clientSecret',
  ])('the secret %s is never taken from a flag', (name) => {
    const { problems } = parseConfigFlags([`--${name}`, KEY]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`--${name}: a secret is never taken from a flag`);
    expect(problems[0]).not.toContain(KEY);
  });
});
