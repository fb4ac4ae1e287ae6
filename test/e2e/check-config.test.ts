// The real command line (src/entry/main.ts, a process of its own): --check-config and a start that cannot
// reach Redis exit 2 with every problem listed, before any port opens; a valid configuration exits 0.
// With upstream credentials on, --check-config also reads which keys the store's records are sealed
// under (a Redis of the suite, a prefix of its own) and names those the configuration lacks.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { generateToken } from '../../src/model/credentials.ts';
import { ManualClock } from '../../src/model/clock.ts';
import type { RedisTokenStore } from '../../src/store/redis.ts';
import { CredentialCipher, keyIdOf } from '../../src/upstream-credentials/cipher.ts';
import { CredentialVault } from '../../src/upstream-credentials/vault.ts';
import { legacyKey } from '../../src/store/layout.ts';
import { keyLayout } from '../../src/store/records.ts';
import { deleteUnder, openRedisStore, rawRedis, redisUrl, uniquePrefix } from '../support/redis.ts';
import { RUN_TS } from '../support/node-ts.ts';

const MASTER = generateToken();
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the CLI (src/entry/main.ts)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-cli-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function run(args: string[], env: Record<string, string>) {
    const result = spawnSync(process.execPath, [...RUN_TS, 'src/entry/main.ts', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      encoding: 'utf8',
      timeout: 25_000,
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  it('--check-config with a malformed master token exits 2 and lists the problem', () => {
    const r = run(['--check-config'], { BEARER_SECRET_MASTER: 'bad' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('is invalid');
    expect(r.stderr).toContain('BEARER_SECRET_MASTER must be exactly 64 lowercase hex characters');
    expect(r.stderr).toContain('config.yaml');
    expect(r.stdout).not.toContain('configuration OK');
  }, 30_000);

  it('--check-config reports every problem at once', () => {
    const r = run(['--check-config'], { BEARER_SECRET_MASTER: 'bad', LOG_LEVEL: 'loud', UPSTREAM_URL: 'ftp://x/mcp' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('BEARER_SECRET_MASTER');
    expect(r.stderr).toContain('LOG_LEVEL');
    expect(r.stderr).toContain('UPSTREAM_URL');
    expect(r.stderr.split('\n').filter((l) => l.startsWith('  - '))).toHaveLength(3);
  }, 30_000);

  it('--check-config names every incomplete upstream-credential setting, and never the key', () => {
    const key = 'ab'.repeat(16);
    const r = run(['--check-config'], {
      BEARER_SECRET_MASTER: MASTER,
      UPSTREAM_CREDENTIALS: 'token-exchange',
      UPSTREAM_CREDENTIALS_PREVIOUS_KEYS: key,
    });
    expect(r.status).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('  - '));
    expect(lines).toHaveLength(4);
    expect(r.stderr).toContain('UPSTREAM_CREDENTIALS_PREVIOUS_KEYS[0] must be 32 random bytes');
    expect(r.stderr).toContain('UPSTREAM_CREDENTIALS_KEY (upstream.credentials.key) is not set');
    expect(r.stderr).toContain('browser sign-in is not configured');
    expect(r.stderr).toContain('UPSTREAM_CREDENTIALS_AUDIENCE (upstream.credentials.audience) is not set');
    expect(r.stderr).not.toContain(key);
  }, 30_000);

  it('--check-config refuses IDP_AUDIENCE equal to PUBLIC_URL while ID-JAG is on, naming both keys (nothing fetched)', () => {
    const r = run(['--check-config', '--skip-network-checks'], {
      BEARER_SECRET_MASTER: MASTER,
      PUBLIC_URL: 'https://mcp.example.com',
      IDP_ISSUER: 'https://idp.example',
      IDP_JWKS_URL: 'https://idp.example/keys',
      IDP_AUDIENCE: 'https://mcp.example.com',
      IDP_ID_JAG: 'true',
    });
    expect(r.status).toBe(2);
    const problems = r.stderr.split('\n').filter((l) => l.startsWith('  - '));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(
      "IDP_AUDIENCE (idp.audience) equals this authorization server's issuer PUBLIC_URL (proxy.publicUrl) https://mcp.example.com while IDP_ID_JAG (idp.idJag) is true",
    );
    expect(r.stdout).not.toContain('configuration OK');
  }, 30_000);

  it('--check-config with a valid token exits 0 (config.yaml found in the working directory)', () => {
    const r = run(['--check-config'], { BEARER_SECRET_MASTER: MASTER, REDIS_URL: redisUrl() });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('configuration OK (config.yaml)');
    expect(r.stdout).not.toContain(MASTER);
  }, 30_000);

  it('start with an unreachable REDIS_URL exits 2 with one paragraph naming REDIS_URL, before opening a port', () => {
    const path = join(dir, 'fast-fail.yaml');
    writeFileSync(
      path,
      ['masterToken: ${BEARER_SECRET_MASTER}', 'redis:', '  connectTimeoutMs: 200', 'proxy:', '  port: 0', 'admin:', '  port: 0', ''].join(
        '\n',
      ),
    );
    const r = run(['--config', path], { BEARER_SECRET_MASTER: MASTER, REDIS_URL: 'redis://127.0.0.1:1' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('REDIS_URL');
    expect(r.stderr).toContain('cannot reach Redis at redis://127.0.0.1:1');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).not.toContain('listening');
    expect(r.stderr).not.toContain(MASTER);
  }, 30_000);

  it('--check-config reports unknown keys of the file with the other problems, and takes keys as flags', () => {
    const path = join(dir, 'typos.yaml');
    writeFileSync(
      path,
      [
        'masterToken: ${BEARER_SECRET_MASTER}',
        'prot: 8080',
        'upsteam:',
        '  url: http://127.0.0.1:3000/mcp',
        'redis:',
        '  uri: redis://127.0.0.1:6379',
        '',
      ].join('\n'),
    );
    const r = run(['--check-config', '--config', path, '--proxy.port', '99999'], { BEARER_SECRET_MASTER: MASTER });
    expect(r.status).toBe(2);
    expect(r.stderr.split('\n').filter((l) => l.startsWith('  - '))).toEqual([
      '  - unknown key "redis.uri" (did you mean "redis.url"?)',
      '  - --proxy.port must be an integer from 0 to 65535 (got "99999")',
      '  - unknown key "prot" (did you mean "proxy"?)',
      '  - unknown key "upsteam" (did you mean "upstream"?)',
    ]);
    expect(r.stdout).not.toContain('configuration OK');
  }, 30_000);

  it('--check-config refuses a zero, negative or enormous quota limit or window, naming the rule by its position', () => {
    const path = join(dir, 'quotas.yaml');
    writeFileSync(
      path,
      [
        'masterToken: ${BEARER_SECRET_MASTER}',
        'policy:',
        '  quotas:',
        '    - { name: fine, per: subject, limit: 10, windowSeconds: 60 }',
        '    - { per: subject, limit: 0, windowSeconds: 60 }',
        '    - { per: client, limit: -1, windowSeconds: 99999999 }',
        '    - { per: address, limit: 10000000000, windowSeconds: 0 }',
        '',
      ].join('\n'),
    );
    const r = run(['--check-config', '--config', path], { BEARER_SECRET_MASTER: MASTER });
    expect(r.status).toBe(2);
    expect(r.stderr.split('\n').filter((l) => l.startsWith('  - '))).toEqual([
      '  - policy.quotas[1].limit must be an integer from 1 to 1000000000 (got 0)',
      '  - policy.quotas[2].limit must be an integer from 1 to 1000000000 (got -1)',
      '  - policy.quotas[2].windowSeconds must be an integer from 1 to 2678400 (got 99999999)',
      '  - policy.quotas[3].limit must be an integer from 1 to 1000000000 (got 10000000000)',
      '  - policy.quotas[3].windowSeconds must be an integer from 1 to 2678400 (got 0)',
    ]);
    expect(r.stdout).not.toContain('configuration OK');
  }, 30_000);

  it('--check-config with nothing listening at REDIS_URL exits 2 with the paragraph start-up gives, not "configuration OK"; --skip-network-checks does not reach Redis', () => {
    const path = join(dir, 'closed-redis.yaml');
    writeFileSync(path, ['masterToken: ${BEARER_SECRET_MASTER}', 'redis:', '  connectTimeoutMs: 200', ''].join('\n'));
    const env = { BEARER_SECRET_MASTER: MASTER, REDIS_URL: 'redis://127.0.0.1:1' };
    const r = run(['--check-config', '--config', path], env);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('cannot reach Redis at redis://127.0.0.1:1');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).not.toContain('configuration OK');
    const skipped = run(['--check-config', '--skip-network-checks', '--config', path], env);
    expect(skipped.stderr).toBe('');
    expect(skipped.status).toBe(0);
    expect(skipped.stdout).toContain('configuration OK');
  }, 30_000);

  it('--check-config on a store of layout 1 exits 2 naming `mcp-bearer-proxy migrate`, and writes nothing; an empty store passes without a version written', async () => {
    const raw = await rawRedis();
    const old = uniquePrefix('check-config-layout');
    const empty = uniquePrefix('check-config-layout-empty');
    try {
      // A record as layout 1 named it (every OAuth record under the one {oauth} tag).
      await raw.hset(legacyKey(keyLayout(old), 'oauthClients', 'mcp_old'), 'clientId', 'mcp_old');
      const env = { BEARER_SECRET_MASTER: MASTER, REDIS_URL: redisUrl() };
      const refused = run(['--check-config', '--redis.keyPrefix', old], env);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toContain('`mcp-bearer-proxy migrate`');
      expect(refused.stdout).not.toContain('configuration OK');
      expect(await raw.get(keyLayout(old).layout())).toBeNull();
      const passed = run(['--check-config', '--redis.keyPrefix', empty], env);
      expect(passed.stdout).toContain('configuration OK');
      expect(await raw.get(keyLayout(empty).layout())).toBeNull();
    } finally {
      await deleteUnder(raw, old);
      await deleteUnder(raw, empty);
      await raw.quit();
    }
  }, 60_000);

  describe('with upstream credentials on, the keys of the records in the store', () => {
    const oldKey = randomBytes(32);
    const otherKey = randomBytes(32);
    const newKey = randomBytes(32);
    const prefix = uniquePrefix('check-config-keys');
    const secret = `kept-access-${randomBytes(12).toString('hex')}`;
    let store: RedisTokenStore;
    const oauth = (key: Buffer, previous: Buffer[] = []) => ({
      BEARER_SECRET_MASTER: MASTER,
      REDIS_URL: redisUrl(),
      UPSTREAM_CREDENTIALS: 'oauth',
      UPSTREAM_CREDENTIALS_KEY: key.toString('hex'),
      ...(previous.length > 0 ? { UPSTREAM_CREDENTIALS_PREVIOUS_KEYS: previous.map((k) => k.toString('hex')).join(',') } : {}),
      UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT: 'https://provider.example/authorize',
      UPSTREAM_PROVIDER_TOKEN_ENDPOINT: 'https://provider.example/token',
      UPSTREAM_PROVIDER_CLIENT_ID: 'mcp',
    });
    const check = (env: Record<string, string>, more: string[] = []) => run(['--check-config', '--redis.keyPrefix', prefix, ...more], env);

    beforeAll(async () => {
      store = await openRedisStore(prefix);
      const clock = new ManualClock(Date.now());
      const issuer = 'https://idp.example';
      const save = (key: Buffer, subject: string) =>
        new CredentialVault({ store, cipher: new CredentialCipher(key), clock }).save(
          { subject, issuer, provider: 'oauth:provider.example' },
          { accessToken: secret, refreshToken: `${secret}-refresh` },
        );
      await save(oldKey, 'alice');
      await save(oldKey, 'bob');
      await save(otherKey, 'carol');
    });
    afterAll(async () => {
      await store?.close();
      const raw = await rawRedis();
      await deleteUnder(raw, prefix);
      await raw.quit();
    });

    it('records under keys the configuration lacks: exit 2, each key id with its count, never a token, a subject or a key', () => {
      const r = check(oauth(newKey));
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(
        `the store holds 3 upstream credential records sealed under key ids the configuration lacks (key id ${keyIdOf(oldKey)}: 2 records, key id ${keyIdOf(otherKey)}: 1 record)`,
      );
      expect(r.stderr).toContain(`UPSTREAM_CREDENTIALS_KEY has key id ${keyIdOf(newKey)}`);
      expect(r.stderr).toContain('UPSTREAM_CREDENTIALS_PREVIOUS_KEYS');
      expect(r.stdout).not.toContain('configuration OK');
      for (const text of [secret, 'alice', 'carol', oldKey.toString('hex'), otherKey.toString('hex'), newKey.toString('hex')])
        expect(r.stderr + r.stdout).not.toContain(text);
    }, 30_000);

    it('one of them named as a previous key: only the other is reported', () => {
      const r = check(oauth(newKey, [oldKey]));
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`(key id ${keyIdOf(otherKey)}: 1 record)`);
      expect(r.stderr).not.toContain(keyIdOf(oldKey));
    }, 30_000);

    it('every key configured: exit 0; with --skip-network-checks the store is not read at all', () => {
      const ok = check(oauth(newKey, [oldKey, otherKey]));
      expect(ok.stderr).toBe('');
      expect(ok.status).toBe(0);
      expect(ok.stdout).toContain('configuration OK');
      const skipped = check({ ...oauth(newKey), REDIS_URL: 'redis://127.0.0.1:1' }, ['--skip-network-checks']);
      expect(skipped.stderr).toBe('');
      expect(skipped.status).toBe(0);
    }, 30_000);
  });

  it('an unknown argument is a usage error (exit 2)', () => {
    const r = run(['--no-such-flag'], { BEARER_SECRET_MASTER: MASTER });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('unknown argument "--no-such-flag"');
    expect(r.stderr).toContain('usage:');
  }, 30_000);
});
