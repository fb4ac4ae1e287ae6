// Several identity providers: `idp.providers` read and checked, and the token exchange and ID-JAG
// verifiers over them: each JWT verified by the provider its `iss` names, with that provider's own
// keys, audience and claim rules (two test IdPs on loopback, each with its own keys).

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { checkIdentityProvider } from '../../src/oauth/idp-check.ts';
import { ConfigError, buildConfig } from '../../src/config/load.ts';
import { configFlagNames } from '../../src/config/flags.ts';
import { createIdJagVerifier, createIdpVerifier } from '../../src/oauth/idp.ts';
import { identityProviders, providerForEmail } from '../../src/oauth/providers.ts';
import { startTestIdp, type TestIdp } from '../support/test-idp.ts';

const MASTER = '3f9c2a7b5e1d4c8a9b0e6f2d7c1a5b3e8f4d2c6a9b1e7f3d5c0a8b2e6f4d1c7a';

function problemsOf(input: Record<string, unknown>, env: Record<string, string> = {}): string[] {
  try {
    buildConfig(input, { BEARER_SECRET_MASTER: MASTER, ...env });
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
}

describe('idp.providers configuration', () => {
  it('is read with its defaults: the IDP_* provider is `default`, each entry keeps its own claim rules', () => {
    const config = buildConfig(
      {
        idp: {
          groupsClaim: 'groups',
          providers: [
            {
              name: 'okta',
              issuer: 'https://okta.example.test/oauth2/default',
              clientId: 'c',
              audience: 'api://mcp',
              jwksUrl: 'https://okta.example.test/keys',
              claims: { groupsClaim: 'roles', requiredGroup: 'mcp' },
              domains: ['Contractors.Example.NET'],
            },
          ],
        },
      },
      {
        BEARER_SECRET_MASTER: MASTER,
        IDP_ISSUER: 'https://entra.example.test',
        IDP_AUDIENCE: 'api://a',
        IDP_JWKS_URL: 'https://entra.example.test/k',
      },
    );
    const providers = identityProviders(config.idp);
    expect(providers.map((p) => [p.name, p.issuer, p.groupsClaim, p.requiredGroup])).toEqual([
      ['default', 'https://entra.example.test', 'groups', undefined],
      ['okta', 'https://okta.example.test/oauth2/default', 'roles', 'mcp'],
    ]);
    expect(identityProviders(config.idp)).toBe(providers);
    expect(providerForEmail(providers, 'ann@contractors.example.net')).toBe('okta');
    expect(providerForEmail(providers, 'ann@elsewhere.example')).toBeUndefined();
  });

  it.each([
    [[{ name: 'Bad Name', issuer: 'https://a.example', clientId: 'c', clientSecret: 's' }], /name must be 1-32 characters/],
    [[{ name: 'a', clientId: 'c', clientSecret: 's' }], /issuer is required/],
    [[{ name: 'a', issuer: 'https://a.example', clientSecret: 's' }], /clientId is required/],
    [[{ name: 'a', issuer: 'https://a.example', clientId: 'c', clientSecret: 's', colour: 'red' }], /unknown field "colour"/],
    [
      [
        { name: 'a', issuer: 'https://a.example', clientId: 'c', clientSecret: 's' },
        { name: 'b', issuer: 'https://a.example', clientId: 'c', clientSecret: 's' },
      ],
      /the issuer https:\/\/a.example is named by two providers/,
    ],
    [
      [
        { name: 'a', issuer: 'https://a.example', clientId: 'c', clientSecret: 's', domains: ['x.example'] },
        { name: 'b', issuer: 'https://b.example', clientId: 'c', clientSecret: 's', domains: ['x.example'] },
      ],
      /the domain x.example is claimed by providers "a" and "b"/,
    ],
    [[{ name: 'a', issuer: 'https://a.example', clientId: 'c' }], /nothing would use it/],
    [[{ name: 'a', issuer: 'https://a.example', clientId: 'c', audience: 'x' }], /audience and jwksUrl must be set together/],
    [[{ name: 'a', issuer: 'http://idp.example', clientId: 'c', clientSecret: 's' }], /must be an https:\/\/ URL/],
    [[], /must be a list of 1 to 20 identity providers/],
  ])('refuses %j', (providers, problem) => {
    expect(problemsOf({ idp: { providers } }).join('\n')).toMatch(problem);
  });

  it('keeps `default` for the IDP_* provider, refuses its issuer twice, and the upstream modes that carry one IdP', () => {
    const env = { IDP_ISSUER: 'https://a.example', IDP_CLIENT_ID: 'c', IDP_CLIENT_SECRET: 's' };
    expect(
      problemsOf({ idp: { providers: [{ name: 'default', issuer: 'https://b.example', clientId: 'c', clientSecret: 's' }] } }, env).join(
        '\n',
      ),
    ).toMatch(/"default" is the IDP_ISSUER provider's name/);
    expect(
      problemsOf({ idp: { providers: [{ name: 'b', issuer: 'https://a.example', clientId: 'c', clientSecret: 's' }] } }, env).join('\n'),
    ).toMatch(/issuer is IDP_ISSUER too/);
    const modeIdp = problemsOf(
      {
        idp: { providers: [{ name: 'b', issuer: 'https://b.example', clientId: 'c', clientSecret: 's' }] },
        upstream: { credentials: { mode: 'idp', key: 'a'.repeat(64) } },
      },
      env,
    );
    expect(modeIdp.join('\n')).toMatch(/several identity providers are configured/);
  });

  it('scim.provider may name any configured provider, and only one', () => {
    const scimToken = randomBytes(32).toString('hex');
    const providers = [{ name: 'okta', issuer: 'https://okta.example.test', clientId: 'c', clientSecret: 's' }];
    const env = { IDP_ISSUER: 'https://a.example', IDP_CLIENT_ID: 'c', IDP_CLIENT_SECRET: 's' };
    expect(problemsOf({ idp: { providers }, scim: { token: scimToken, provider: 'okta' } }, env)).toEqual([]);
    expect(problemsOf({ idp: { providers }, scim: { token: scimToken, provider: 'nope' } }, env).join('\n')).toMatch(
      /scim.provider "nope" names no configured identity provider \(configured: default, okta\)/,
    );
  });

  it('is never taken from a command-line flag (it holds client secrets)', () => {
    expect(configFlagNames()).toContain('idp.issuer');
    expect(configFlagNames()).not.toContain('idp.providers');
  });
});

describe('token exchange and ID-JAG over two providers', () => {
  let a: TestIdp;
  let b: TestIdp;
  beforeAll(async () => {
    a = await startTestIdp({ alg: 'RS256' });
    b = await startTestIdp({ alg: 'ES256' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  function config(idJag = false) {
    return buildConfig(
      {
        idp: {
          idJag,
          providers: [
            { name: 'a', issuer: a.issuer, clientId: 'ca', audience: 'aud-a', jwksUrl: a.jwksUrl },
            { name: 'b', issuer: b.issuer, clientId: 'cb', audience: 'aud-b', jwksUrl: b.jwksUrl, claims: { requiredGroup: 'mcp' } },
          ],
        },
      },
      { BEARER_SECRET_MASTER: MASTER },
    ).idp;
  }
  const now = () => Math.floor(Date.now() / 1000);

  it('verifies each JWT with its own provider: the same sub at both is two identities', async () => {
    const verifier = createIdpVerifier(config())!;
    const fromA = await verifier.verify(await a.sign({ iss: a.issuer, aud: 'aud-a', sub: 'same', exp: now() + 60 }), Date.now());
    const fromB = await verifier.verify(
      await b.sign({ iss: b.issuer, aud: 'aud-b', sub: 'same', exp: now() + 60, groups: ['mcp'] }),
      Date.now(),
    );
    expect(fromA).toMatchObject({ subject: 'same', issuer: a.issuer });
    expect(fromB).toMatchObject({ subject: 'same', issuer: b.issuer });
  });

  it("refuses a JWT naming one provider signed with the other's key, another's audience, or an unknown issuer", async () => {
    const verifier = createIdpVerifier(config())!;
    const forged = await a.sign({ iss: b.issuer, aud: 'aud-b', sub: 'x', exp: now() + 60, groups: ['mcp'] });
    await expect(verifier.verify(forged, Date.now())).rejects.toThrow();
    const wrongAudience = await a.sign({ iss: a.issuer, aud: 'aud-b', sub: 'x', exp: now() + 60 });
    await expect(verifier.verify(wrongAudience, Date.now())).rejects.toThrow(/aud/);
    const unknown = await a.sign({ iss: 'https://elsewhere.example', aud: 'aud-a', sub: 'x', exp: now() + 60 });
    await expect(verifier.verify(unknown, Date.now())).rejects.toThrow(/issuer of no configured provider/);
  });

  it("applies each provider's own claim rules (b requires the group, a does not)", async () => {
    const verifier = createIdpVerifier(config())!;
    await expect(verifier.verify(await b.sign({ iss: b.issuer, aud: 'aud-b', sub: 'x', exp: now() + 60 }), Date.now())).rejects.toThrow(
      /required group missing/,
    );
    await expect(
      verifier.verify(await a.sign({ iss: a.issuer, aud: 'aud-a', sub: 'x', exp: now() + 60 }), Date.now()),
    ).resolves.toMatchObject({ subject: 'x' });
  });

  it('verifies ID-JAGs at the provider their iss names, with its own keys', async () => {
    const verifier = createIdJagVerifier(config(true))!;
    const claims = (iss: string) => ({
      iss,
      aud: 'https://as.example',
      sub: 'same',
      exp: now() + 60,
      iat: now(),
      jti: 'j1',
      client_id: 'c',
    });
    const header = { typ: 'oauth-id-jag+jwt' };
    await expect(
      verifier.verify(await b.sign({ ...claims(b.issuer), groups: ['mcp'] }, header), 'https://as.example', Date.now()),
    ).resolves.toMatchObject({
      issuer: b.issuer,
    });
    await expect(verifier.verify(await b.sign(claims(a.issuer), header), 'https://as.example', Date.now())).rejects.toThrow();
  });
});

describe('--check-config with several providers', () => {
  let good: DemoIdp;
  const secret = randomBytes(32).toString('hex');
  beforeAll(async () => {
    good = await startDemoIdp({ clientId: 'sidecar', clientSecret: secret, redirectUri: () => 'http://127.0.0.1:9/oauth/callback' });
  });
  afterAll(async () => {
    await good?.close();
  });

  it('checks each provider and names the one at fault', async () => {
    const wrong = randomBytes(32).toString('hex');
    const config = buildConfig(
      {
        proxy: { publicUrl: 'http://127.0.0.1:9' },
        idp: {
          requestTimeoutMs: 10_000,
          providers: [
            { name: 'works', issuer: good.issuer, clientId: 'sidecar', clientSecret: secret },
            // The same server under a second issuer spelling stands for a second provider: the wrong secret is this entry's alone.
            { name: 'wrong-secret', issuer: `${good.issuer}/`, clientId: 'sidecar', clientSecret: wrong },
          ],
        },
      },
      { BEARER_SECRET_MASTER: MASTER },
    );
    const problems = await checkIdentityProvider(config);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^identity provider "wrong-secret": /);
    expect(problems[0]).toContain("refused the sidecar's client credentials");
    expect(problems[0]).not.toContain(wrong);
  });
});
