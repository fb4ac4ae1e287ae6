// The layout migration end to end, for test/integration/migrate.test.ts (a small store) and
// test/slow/migrate-100k.test.ts (100,000 records): a store written by the layout-1 code
// (test/support/layout-1.ts); the current sidecar refusing it; a sidecar of the layout-1 code serving
// it under load while `mcp-bearer-proxy migrate` runs, is killed at a random point and run again;
// then the current sidecar serving every token as before.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { ensureLayout } from '../../src/store/layout.ts';
import { keyLayout } from '../../src/store/records.ts';
import { startEchoUpstream } from './fake-upstreams.ts';
import { basic, postForm, postMcp } from './http.ts';
import { layoutOneCode, type WrittenToken } from './layout-1.ts';
import { RUN_TS } from './node-ts.ts';
import { spawnProcess, startProcess, type Started } from './process.ts';
import { deleteUnder, keysUnder, rawRedis, redisUrl, uniquePrefix } from './redis.ts';

const BIN = [process.execPath, ...RUN_TS, 'bin/mcp-bearer-proxy.js'];

export interface MigrationRun {
  written: number;
  /** Requests the load sent through the layout-1 sidecar during the migration, and how many answered otherwise than expected. */
  loadRequests: number;
  loadMismatches: number;
  /** The output of the interrupted run, of the run after it, and of a third run. */
  outputs: [string, string, string];
}

function expected(t: WrittenToken): number {
  return t.revoked ? 401 : 200;
}

export async function runMigrationScenario(options: {
  clients: number;
  pairs: number;
  killWithinMs: number;
  checkAll: boolean;
}): Promise<MigrationRun> {
  const prefix = uniquePrefix('migrate');
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-migrate-'));
  const code = layoutOneCode();
  const upstream = await startEchoUpstream();
  const raw = await rawRedis();
  const master = generateToken();
  const configPath = join(dir, 'config.yaml');
  // Many 401s from one address are the point here, not an attack: the failed-auth limit is off.
  writeFileSync(configPath, ['redis:', `  keyPrefix: "${prefix}"`, 'rateLimits:', '  failedAuthPerMinute: 0', ''].join('\n'));
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: '0',
    ADMIN_PORT: '0',
    LOG_LEVEL: 'warn',
    UPSTREAM_URL: upstream.url,
    MCP_AUTH_CONFIG: configPath,
    BEARER_SECRET_MASTER: master,
    REDIS_URL: redisUrl(),
  };
  const running: Started[] = [];
  try {
    const tokens = await code.write(redisUrl(), prefix, options.clients, options.pairs);
    const keys = keyLayout(prefix);

    // The current version refuses the store, naming the command.
    const check = await ensureLayout(raw, keys);
    expect(check.ok).toBe(false);
    const refused = spawnProcess(BIN, env);
    expect(await refused.exit).toBe(2);
    expect(refused.output()).toContain('mcp-bearer-proxy migrate');

    // The layout-1 sidecar serves the store under load while the migration runs.
    const old = await startProcess([process.execPath, ...RUN_TS, join(code.dir, 'src/entry/main.ts')], env, [/proxy listening on (\S+)/]);
    running.push(old);
    const oldUrl = `${/proxy listening on (\S+)/.exec(old.output())![1]!}/mcp`;
    const sample = tokens.filter((t) => t.kind !== 'refresh');
    let loading = true;
    let loadRequests = 0;
    let loadMismatches = 0;
    const load = Array.from({ length: 4 }, async (_, w) => {
      for (let i = w; loading; i += 4) {
        const t = sample[i % sample.length]!;
        const status = (await postMcp(oldUrl, t.raw)).status;
        loadRequests++;
        if (status !== expected(t)) loadMismatches++;
      }
    });

    // Killed at a random point once it is under way: after a random number of its progress lines
    // (one per family and node), then within a random fraction of killWithinMs.
    const interrupted = spawnProcess([...BIN, 'migrate'], env);
    const lines = 1 + Math.floor(Math.random() * 6);
    await interrupted.waitFor((out) => (out.match(/^migrating /gm) ?? []).length >= lines);
    const killed = setTimeout(() => interrupted.child.kill('SIGKILL'), Math.floor(Math.random() * options.killWithinMs));
    await interrupted.exit;
    clearTimeout(killed);
    const resumed = spawnProcess([...BIN, 'migrate'], env);
    expect(await resumed.exit).toBe(0);
    // The load stops and the layout-1 sidecar goes (as at the end of a roll-out): it writes lastUsedAt
    // as tokens are presented, in batches, which a run catches up with. After that catch-up run,
    // with no writer left, one more run finds nothing to add.
    loading = false;
    await Promise.all(load);
    old.child.kill('SIGKILL');
    await old.exit;
    const catchUp = spawnProcess([...BIN, 'migrate'], env);
    expect(await catchUp.exit).toBe(0);
    const again = spawnProcess([...BIN, 'migrate'], env);
    expect(await again.exit).toBe(0);

    // The current sidecar: every token as it was.
    const current = await startProcess(BIN, env, [/proxy listening on (\S+)/, /admin listening on (\S+)/]);
    running.push(current);
    const proxyUrl = /proxy listening on (\S+)/.exec(current.output())![1]!;
    const adminUrl = /admin listening on (\S+)/.exec(current.output())![1]!;
    const checked = options.checkAll ? sample : sample.filter((_, i) => i % 97 === 0);
    for (const t of checked)
      expect([t.raw.slice(0, 8), (await postMcp(`${proxyUrl}/mcp`, t.raw)).status]).toEqual([t.raw.slice(0, 8), expected(t)]);

    // A refresh token issued and rotated under layout 1 rotates under the current one.
    const refresh = tokens.find((t) => t.kind === 'refresh')!;
    const rotated = await postForm(
      `${proxyUrl}/token`,
      { grant_type: 'refresh_token', refresh_token: refresh.raw },
      basic(refresh.clientId!, refresh.clientId!),
    );
    expect(rotated.status).toBe(200);
    expect((await postMcp(`${proxyUrl}/mcp`, rotated.body.access_token)).status).toBe(200);

    const admin = async (op: string, body: Record<string, unknown>) => {
      const res = await fetch(`${adminUrl}/oauth/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${master}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, number> };
    };
    // deleteClient reaches the client's layout-1 tokens.
    const victim = tokens.find((t) => t.kind === 'access' && !t.revoked && t.clientId !== refresh.clientId)!;
    const deleted = await admin('deleteClient', { clientId: victim.clientId });
    expect(deleted.status).toBe(200);
    expect(deleted.body.accessTokensRevoked).toBeGreaterThan(0);
    expect((await postMcp(`${proxyUrl}/mcp`, victim.raw)).status).toBe(401);
    // revokeSubject finds a person's layout-1 tokens through the migrated index.
    const person = tokens.find((t) => t.kind === 'access' && !t.revoked && t.subject !== undefined && t.clientId !== victim.clientId)!;
    const offboarded = await admin('revokeSubject', { subject: person.subject });
    expect(offboarded.status).toBe(200);
    expect(offboarded.body.accessTokensRevoked).toBeGreaterThan(0);
    expect((await postMcp(`${proxyUrl}/mcp`, person.raw)).status).toBe(401);
    expect((await admin('revokeSubject', { subject: person.subject })).body.accessTokensRevoked).toBe(0);

    // --finish: the layout-1 keys go; the current sidecar still serves.
    const finish = spawnProcess([...BIN, 'migrate', '--finish'], env);
    expect(await finish.exit).toBe(0);
    expect(
      (await keysUnder(raw, prefix)).filter((k) =>
        /\{oauth\}:oauth(AccessTokens|RefreshTokens|Clients|ClientTokens|RefreshFamilies|AuthorizationCodes):/.test(k),
      ),
    ).toEqual([]);
    const still = sample.find((t) => !t.revoked && t.kind === 'access' && t.clientId !== victim.clientId && t.subject !== person.subject)!;
    expect((await postMcp(`${proxyUrl}/mcp`, still.raw)).status).toBe(200);
    return {
      written: (await keysUnder(raw, prefix)).length,
      loadRequests,
      loadMismatches,
      outputs: [interrupted.output(), resumed.output(), again.output()],
    };
  } finally {
    for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    await deleteUnder(raw, prefix);
    await raw.quit();
    await upstream.close();
    code.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}
