// The identity provider at start-up, as a real process (`npm start`'s src/entry/main.ts): an unreachable
// issuer and a wrong client secret each stop it with exit 2 and one paragraph naming the URL tried
// and what to check, before any port opens; `--check-config` checks the IdP too, unless told not to.
// The IdP is the in-process oidc-provider; nothing here needs Redis (the IdP is checked first).

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { startDemoIdp, type DemoIdp } from '../../demo/idp.ts';
import { redisUrl } from '../support/redis.ts';
import { freePort } from '../support/redis-server.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const CREDENTIALS_REFUSED = "the identity provider refused the sidecar's client credentials: check IDP_CLIENT_ID / IDP_CLIENT_SECRET";

let idp: DemoIdp;
let refusedPort: number;
const clientSecret = randomBytes(32).toString('hex');

beforeAll(async () => {
  idp = await startDemoIdp({ clientId: 'sidecar', clientSecret, redirectUri: () => 'http://127.0.0.1:9/oauth/callback' });
  refusedPort = await freePort(); // bound and closed again: nothing listens there
});
afterAll(async () => {
  await idp?.close();
});

function run(args: string[], idpEnv: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/entry/main.ts', ...args],
      {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          BEARER_SECRET_MASTER: generateToken(),
          // Nothing listens here: reaching the store would be a failure of its own, with another message.
          REDIS_URL: `redis://127.0.0.1:${refusedPort}`,
          PORT: '0',
          ADMIN_PORT: '0',
          PUBLIC_URL: 'http://127.0.0.1:9',
          ...idpEnv,
        },
        timeout: 25_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}

describe('npm start with an unusable identity provider', () => {
  it('an unreachable issuer: exit 2, one paragraph with the discovery URL tried', async () => {
    const issuer = `http://127.0.0.1:${refusedPort}/realms/main`;
    const r = await run([], { IDP_ISSUER: issuer, IDP_CLIENT_ID: 'sidecar', IDP_CLIENT_SECRET: clientSecret });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`${issuer}/.well-known/openid-configuration`);
    expect(r.stderr).toContain('IDP_ISSUER');
    expect(r.stderr).not.toContain('Redis');
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it('a wrong client secret: exit 2, reported as refused client credentials, the secret not printed', async () => {
    const wrong = randomBytes(32).toString('hex');
    const r = await run([], { IDP_ISSUER: idp.issuer, IDP_CLIENT_ID: 'sidecar', IDP_CLIENT_SECRET: wrong });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(CREDENTIALS_REFUSED);
    expect(r.stderr).not.toContain(wrong);
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it('a usable IdP passes the check: the start-up goes on to Redis (which is down here)', async () => {
    const r = await run([], { IDP_ISSUER: idp.issuer, IDP_CLIENT_ID: 'sidecar', IDP_CLIENT_SECRET: clientSecret });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('cannot reach Redis');
    expect(r.stderr).not.toContain('identity provider');
  }, 30_000);
});

describe('--check-config and the identity provider', () => {
  it('checks the IdP: exit 2 for a wrong secret, 0 for the right one', async () => {
    const bad = await run(['--check-config'], { IDP_ISSUER: idp.issuer, IDP_CLIENT_ID: 'sidecar', IDP_CLIENT_SECRET: 'wrong-secret' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(CREDENTIALS_REFUSED);
    // --check-config also asks Redis for a PING: this one answers.
    const good = await run(['--check-config'], {
      IDP_ISSUER: idp.issuer,
      IDP_CLIENT_ID: 'sidecar',
      IDP_CLIENT_SECRET: clientSecret,
      REDIS_URL: redisUrl(),
    });
    expect(good.stderr).toBe('');
    expect(good.code).toBe(0);
    expect(good.stdout).toContain('configuration OK');
  }, 30_000);

  it('--skip-network-checks: the configuration alone, an unreachable issuer not fetched', async () => {
    const r = await run(['--check-config', '--skip-network-checks'], {
      IDP_ISSUER: `http://127.0.0.1:${refusedPort}`,
      IDP_CLIENT_ID: 'sidecar',
      IDP_CLIENT_SECRET: clientSecret,
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  }, 30_000);

  it('--skip-network-checks without --check-config is a usage error', async () => {
    const r = await run(['--skip-network-checks'], {});
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--skip-network-checks goes with --check-config');
  }, 30_000);
});
