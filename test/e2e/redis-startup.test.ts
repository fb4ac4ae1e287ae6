// Redis at start-up: a refused connection and rejected credentials fail at once with what is wrong,
// instead of waiting out the connect timeout and calling it "no answer". Against a refused loopback
// port and a private redis-server with requirepass. The connect timeout is set far above the test's
// own timeout, so a wait for it fails the test.

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { connectRedis, createRedisClient, RedisConnectError } from '../../src/store/redis-connection.ts';
import { freePort, startRedisServer, type RedisServer } from '../support/redis-server.ts';
import { RUN_TS } from '../support/node-ts.ts';
import { startProcess } from '../support/process.ts';

const PASSWORD = 'correct-horse-battery';
const WRONG = 'wrong-password-123';
const LONG_CONNECT_TIMEOUT_MS = 120_000;
const ROOT = new URL('../..', import.meta.url).pathname;

let redis: RedisServer;
let refusedPort: number;
let dir: string;

beforeAll(async () => {
  redis = await startRedisServer(['--requirepass', PASSWORD]);
  refusedPort = await freePort(); // bound and closed again: nothing listens there
  dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-startup-'));
});

afterAll(async () => {
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A user of the private Redis with the password, every key and command but the `denied` one. */
async function aclUser(name: string, denied: string): Promise<void> {
  const admin = createRedisClient({ url: `redis://:${PASSWORD}@127.0.0.1:${redis.port}`, commandTimeoutMs: 1000, connectTimeoutMs: 5000 });
  await connectRedis(admin, 5000);
  try {
    await admin.call('ACL', 'SETUSER', name, 'on', `>${PASSWORD}`, '~*', '&*', '+@all', denied);
  } finally {
    admin.disconnect();
  }
}

async function connectError(url: string): Promise<unknown> {
  const client = createRedisClient({ url, commandTimeoutMs: 1000, connectTimeoutMs: LONG_CONNECT_TIMEOUT_MS });
  try {
    await connectRedis(client, LONG_CONNECT_TIMEOUT_MS);
    return undefined;
  } catch (err) {
    return err;
  } finally {
    client.disconnect();
  }
}

describe('connectRedis', () => {
  it('a refused connection fails at once as "refused"', async () => {
    const err = await connectError(`redis://127.0.0.1:${refusedPort}`);
    expect(err).toBeInstanceOf(RedisConnectError);
    expect((err as RedisConnectError).failure).toBe('refused');
    expect((err as Error).message).toContain('ECONNREFUSED');
  });

  it('a wrong password fails at once as "auth" (WRONGPASS), not as a timeout', async () => {
    const err = await connectError(`redis://:${WRONG}@127.0.0.1:${redis.port}`);
    expect(err).toBeInstanceOf(RedisConnectError);
    expect((err as RedisConnectError).failure).toBe('auth');
    expect((err as Error).message).toMatch(/WRONGPASS|invalid password/);
  });

  it('no password where one is required fails at once as "auth" (NOAUTH)', async () => {
    const err = await connectError(`redis://127.0.0.1:${redis.port}`);
    expect(err).toBeInstanceOf(RedisConnectError);
    expect((err as RedisConnectError).failure).toBe('auth');
    expect((err as Error).message).toContain('NOAUTH');
  });

  it('the right password connects (the server above is a working one)', async () => {
    const client = createRedisClient({
      url: `redis://:${PASSWORD}@127.0.0.1:${redis.port}`,
      commandTimeoutMs: 1000,
      connectTimeoutMs: LONG_CONNECT_TIMEOUT_MS,
    });
    try {
      await connectRedis(client, LONG_CONNECT_TIMEOUT_MS);
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
    }
  });
});

describe('npm start against an unusable Redis', () => {
  function start(
    redisUrl: string,
    extraEnv: Record<string, string> = {},
    args: string[] = [],
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const config = join(dir, 'startup.yaml');
    writeFileSync(
      config,
      [
        'masterToken: ${BEARER_SECRET_MASTER}',
        'redis:',
        `  connectTimeoutMs: ${LONG_CONNECT_TIMEOUT_MS / 2}`,
        'proxy:',
        '  port: 0',
        'admin:',
        '  port: 0',
        '',
      ].join('\n'),
    );
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [...RUN_TS, 'src/entry/main.ts', '--config', config, ...args],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', BEARER_SECRET_MASTER: generateToken(), REDIS_URL: redisUrl, ...extraEnv },
          timeout: 25_000,
        },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr }),
      );
    });
  }

  it('a refused connection: exit 2 at once, one paragraph saying nothing listens there', async () => {
    const r = await start(`redis://127.0.0.1:${refusedPort}`);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`cannot reach Redis at redis://127.0.0.1:${refusedPort}: the connection was refused`);
    expect(r.stderr).toContain('REDIS_URL');
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it('a wrong password: exit 2 at once, reported as rejected credentials, the password not printed', async () => {
    const r = await start(`redis://sidecar:${WRONG}@127.0.0.1:${redis.port}`);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`Redis at redis://***@127.0.0.1:${redis.port} refused the sidecar's credentials`);
    expect(r.stderr).not.toContain('no answer within');
    expect(r.stderr).not.toContain(WRONG);
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it("an ACL user that may not run a command of the store's plans: exit 2 before serving, one paragraph saying what the store needs", async () => {
    // As a Redis before 7.0 would refuse PEXPIRE ... NX, this user may not run PEXPIRE at all.
    await aclUser('noexpire', '-pexpire');
    const r = await start(`redis://noexpire:${PASSWORD}@127.0.0.1:${redis.port}`, { REDIS_LOOKUP_CACHE: 'off' });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain("Redis refused the store's plan script (");
    expect(r.stderr).toContain("can't run this command");
    expect(r.stderr).toContain('the store needs Redis 7.0 or later');
    expect(r.stderr).not.toContain(PASSWORD);
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it('an ACL user that may not subscribe to revocation notices: exit 2 before serving, one paragraph naming the channel', async () => {
    await aclUser('nosubscribe', '-subscribe');
    const r = await start(`redis://nosubscribe:${PASSWORD}@127.0.0.1:${redis.port}`, { REDIS_LOOKUP_CACHE: 'off' });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(
      "Redis refused a command the sidecar needs (Redis failed: NOPERM this user has no permissions to run the 'subscribe' command)",
    );
    expect(r.stderr).toContain('SUBSCRIBE and PUBLISH on the channel <redis.keyPrefix>revocations');
    expect(r.stderr).not.toContain(PASSWORD);
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it('--check-config with an ACL user that may not subscribe to revocation notices: exit 2, the same paragraph', async () => {
    await aclUser('nosubscribe-check', '-subscribe');
    const r = await start(`redis://nosubscribe-check:${PASSWORD}@127.0.0.1:${redis.port}`, { REDIS_LOOKUP_CACHE: 'off' }, [
      '--check-config',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`Redis at redis://***@127.0.0.1:${redis.port}: Redis refused a command the sidecar needs (`);
    expect(r.stderr).toContain('SUBSCRIBE and PUBLISH on the channel <redis.keyPrefix>revocations');
    expect(r.stderr).not.toContain(PASSWORD);
    expect(r.stdout).not.toContain('configuration OK');
  }, 30_000);

  it('the lookup cache on, with an ACL user that may not run CLIENT: exit 2, one paragraph saying what tracking needs', async () => {
    await aclUser('nocache', '-client');
    const r = await start(`redis://nocache:${PASSWORD}@127.0.0.1:${redis.port}`, { REDIS_LOOKUP_CACHE: 'tracking' });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('redis.lookupCache is "tracking", but Redis refused to set up invalidation tracking (NOPERM');
    expect(r.stderr).toContain('or set redis.lookupCache (REDIS_LOOKUP_CACHE) to off');
    expect(r.stderr).not.toContain(PASSWORD);
    expect(r.stdout).not.toContain('listening');
  }, 30_000);

  it('the lookup cache left at its default (auto), with an ACL user that may not run CLIENT: starts strict, says so once, and the metric shows why', async () => {
    await aclUser('nocache-auto', '-client');
    const config = join(dir, 'auto.yaml');
    writeFileSync(config, ['masterToken: ${BEARER_SECRET_MASTER}', 'proxy:', '  port: 0', 'admin:', '  port: 0', ''].join('\n'));
    const master = generateToken();
    const started = await startProcess(
      [process.execPath, ...RUN_TS, 'src/entry/main.ts', '--config', config],
      {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        BEARER_SECRET_MASTER: master,
        REDIS_URL: `redis://nocache-auto:${PASSWORD}@127.0.0.1:${redis.port}`,
        LOG_FORMAT: 'json',
        UPSTREAM_URL: 'http://127.0.0.1:9/mcp',
      },
      [/proxy listening on (\S+)/, /admin listening on (\S+)/],
    );
    try {
      const out = started.output();
      const warnings = out.split('\n').filter((l) => l.includes('token lookup cache off (redis.lookupCache: auto)'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, reason: 'tracking_refused' }); // pino's warn;
      expect(out).not.toContain(PASSWORD);
      const adminUrl = /admin listening on (\S+)/.exec(out)![1]!;
      const scrape = await (await fetch(`${adminUrl}/metrics`)).text();
      expect(scrape).toContain('mcp_auth_lookup_cache_unavailable{reason="tracking_refused"} 1');
      expect(scrape).toContain('mcp_auth_lookup_cache_live 0');
      // The store works without the cache: an admin operation writes and reads Redis.
      const created = await fetch(`${adminUrl}/oauth/createClient`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${master}` },
        body: JSON.stringify({ clientName: 'auto-strict' }),
      });
      expect(created.status).toBe(201);
    } finally {
      started.child.kill('SIGKILL');
      await started.exit;
    }
  }, 30_000);
});
