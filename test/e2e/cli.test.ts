// The admin CLI as a real process (node bin/mcp-bearer-proxy.js, the package's `bin`) against a running
// sidecar with a real Redis: every admin operation, human and --json output, the token helpers, and
// every documented exit code.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOperations } from '../../src/admin/operations.ts';
import { EXIT } from '../../src/entry/cli.ts';
import { ADMIN_OPERATIONS } from '../../src/admin/declarations.ts';
import { kebab } from '../../src/admin/spec.ts';
import { hashToken, TTL_7_DAYS } from '../../src/model/credentials.ts';
import { redisUrl } from '../support/redis.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { initializeStatus } from '../support/http.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = 'bin/mcp-bearer-proxy.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI; `env` replaces the admin-related environment entirely (no inherited master token). */
async function cli(args: string[], options: { env?: Record<string, string>; input?: string } = {}): Promise<Run> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env };
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.end(options.input ?? '');
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

let stack: Stack;
let env: Record<string, string>;

function mcpStatus(token: string): Promise<number> {
  return initializeStatus(stack, token);
}

beforeAll(async () => {
  stack = await startStack();
  env = { ADMIN_URL: stack.adminUrl, BEARER_SECRET_MASTER: stack.masterToken };
});
afterAll(async () => {
  await stack?.close();
});

describe('admin commands against a running sidecar', () => {
  it('every admin operation the listener serves has a command in the help', async () => {
    expect(Object.keys(adminOperations)).toEqual(Object.keys(ADMIN_OPERATIONS));
    const help = await cli(['admin', 'help']);
    expect(help.code).toBe(EXIT.ok);
    for (const [name, spec] of Object.entries(ADMIN_OPERATIONS))
      expect(help.stdout).toContain(`${kebab(name)} `.padEnd(25) + spec.description);
  });

  it('create-client (human output), list-clients, create-access-token, delete-client', async () => {
    const created = await cli(
      ['admin', 'create-client', '--name', 'ci-bot', '--grant-types', 'client_credentials,refresh_token', '--scope', 'mcp:read mcp:write'],
      { env },
    );
    expect(created.stderr).toBe('');
    expect(created.code).toBe(EXIT.ok);
    const clientId = /^clientId: (mcp_[0-9a-f]{32})$/m.exec(created.stdout)?.[1];
    expect(clientId).toBeDefined();
    expect(created.stdout).toMatch(/^clientSecret: [0-9a-f]{64} {2}\(shown once: store it now\)$/m);
    expect(created.stdout).toContain('grantTypes: client_credentials, refresh_token');
    expect(created.stdout).toMatch(/^createdAt: \d+ {2}\(\d{4}-\d\d-\d\dT/m);

    const listed = await cli(['admin', 'list-clients'], { env });
    expect(listed.code).toBe(EXIT.ok);
    expect(listed.stdout.split('\n')[0]).toMatch(/^CLIENT ID +NAME +SOURCE +PROFILE +GRANTS +CREATED +REVOKED$/);
    expect(listed.stdout).toMatch(new RegExp(`^${clientId} +ci-bot +admin +default +client_credentials,refresh_token `, 'm'));

    const issued = await cli(['admin', 'createAccessToken', `--client-id=${clientId}`, '--lifetime-seconds', '600', '--json'], { env });
    expect(issued.code).toBe(EXIT.ok);
    const body = JSON.parse(issued.stdout) as { accessToken: string; expiresIn: number; clientId: string };
    expect(body).toMatchObject({ expiresIn: 600, clientId, tokenType: 'Bearer' });
    expect(await mcpStatus(body.accessToken)).toBe(200);

    const deleted = await cli(['admin', 'delete-client', '--client-id', clientId!], { env });
    expect(deleted.code).toBe(EXIT.ok);
    expect(deleted.stdout).toContain(`clientId: ${clientId}`);
    expect(deleted.stdout).toContain('accessTokensRevoked: 1');
    expect(await mcpStatus(body.accessToken)).toBe(401);

    // The sidecar refuses a token for a deleted client: exit 1 with its reason.
    const refused = await cli(['admin', 'create-access-token', '--client-id', clientId!, '--lifetime-seconds', '60'], { env });
    expect(refused.code).toBe(EXIT.refused);
    expect(refused.stderr).toContain('create-access-token failed: 400 invalid_request');
  });

  it('--json prints the sidecar answer as it is', async () => {
    const created = await cli(
      [
        'admin',
        'create-client',
        '--client-name',
        'json',
        '--redirect-uri',
        'https://a.example/cb',
        '--redirect-uri',
        'https://b.example/cb',
        '--json',
      ],
      { env },
    );
    expect(created.code).toBe(EXIT.ok);
    const client = JSON.parse(created.stdout) as { clientId: string; clientSecret: string; redirectUris: string[] };
    expect(client.redirectUris).toEqual(['https://a.example/cb', 'https://b.example/cb']);
    const listed = JSON.parse((await cli(['admin', 'list-clients', '--json'], { env })).stdout) as { clients: Array<{ clientId: string }> };
    expect(listed.clients.some((c) => c.clientId === client.clientId)).toBe(true);
    expect(JSON.stringify(listed)).not.toContain(client.clientSecret);
  });

  it('seed-default-profiles and list-audit-events', async () => {
    const seeded = await cli(['admin', 'seed-default-profiles'], { env });
    expect(seeded.code).toBe(EXIT.ok);
    expect(seeded.stdout).toMatch(/^created: /);
    expect(seeded.stdout).toMatch(/^default +\d+ +\d+ /m);
    const again = await cli(['admin', 'seed-default-profiles', '--json'], { env });
    expect(JSON.parse(again.stdout).created).toEqual([]);

    const audit = await cli(['admin', 'list-audit-events', '--count', '3'], { env });
    expect(audit.code).toBe(EXIT.ok);
    const lines = audit.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^TIME +WHO +ACTION +RESULT +CLIENT +TOKEN +DETAIL$/);
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\dT\S+Z +master +seedDefaultProfiles +ok /);
    const json = JSON.parse((await cli(['admin', 'list-audit-events', '--count', '2', '--json'], { env })).stdout) as { events: unknown[] };
    expect(json.events).toHaveLength(2);
  });

  it('revoke-user-token from stdin, or by the hash `token hash` prints', async () => {
    const now = stack.clock.now();
    const put = async () => {
      const token = randomBytes(32).toString('hex');
      await stack.store.putUserToken({
        tokenHash: hashToken(token),
        subject: 'bob',
        issuer: 'https://idp',
        createdAt: now,
        expiresAt: now + TTL_7_DAYS,
      });
      expect(await mcpStatus(token)).toBe(200);
      return token;
    };
    const first = await put();
    const viaStdin = await cli(['admin', 'revoke-user-token', '--token', '-'], { env, input: `${first}\n` });
    expect(viaStdin.code).toBe(EXIT.ok);
    expect(viaStdin.stdout).toContain(`tokenHash: ${hashToken(first)}`);
    expect(viaStdin.stdout).toContain('revoked: true');
    expect(await mcpStatus(first)).toBe(401);

    const second = await put();
    const hashed = await cli(['token', 'hash', '-'], { input: second });
    expect(hashed.code).toBe(EXIT.ok);
    expect(hashed.stdout).toBe(`${hashToken(second)}\n`);
    const viaHash = await cli(['admin', 'revoke-user-token', '--token-hash', hashed.stdout.trim()], { env });
    expect(viaHash.code).toBe(EXIT.ok);
    expect(await mcpStatus(second)).toBe(401);

    const unknown = await cli(['admin', 'revoke-user-token', '--token-hash', hashToken('nothing')], { env });
    expect(unknown.code).toBe(EXIT.refused);
    expect(unknown.stderr).toContain('404 not_found');
  });
});

describe.concurrent('exit codes', () => {
  it('3 when the master token is refused', async () => {
    const run = await cli(['admin', 'list-clients'], { env: { ...env, BEARER_SECRET_MASTER: randomBytes(32).toString('hex') } });
    expect(run.code).toBe(EXIT.unauthorized);
    expect(run.stderr).toContain('the master token was refused');
    expect(run.stdout).toBe('');
  });

  it('4 when the admin listener cannot be reached', async () => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as { port: number };
    await new Promise((r) => probe.close(r));
    const run = await cli(['admin', 'list-clients'], { env: { ...env, ADMIN_URL: `http://127.0.0.1:${port}` } });
    expect(run.code).toBe(EXIT.unavailable);
    expect(run.stderr).toContain(`cannot reach the admin listener at http://127.0.0.1:${port} (ECONNREFUSED)`);
  });

  it('4 when the sidecar answers 503 (its store is down)', async () => {
    const broken = await startStack({ store: 'memory' });
    try {
      await broken.store.close();
      const run = await cli(['admin', 'list-clients'], { env: { ADMIN_URL: broken.adminUrl, BEARER_SECRET_MASTER: broken.masterToken } });
      expect(run.code).toBe(EXIT.unavailable);
      expect(run.stderr).toContain('503 temporarily_unavailable');
    } finally {
      await broken.close();
    }
  });

  it.each([
    ['an unknown operation', ['admin', 'drop-everything'], /unknown admin operation "drop-everything"/],
    ['an unknown flag', ['admin', 'list-clients', '--all'], /unknown flag --all for list-clients \(it takes no flags\)/],
    ['a flag without its value', ['admin', 'delete-client', '--client-id'], /--client-id needs a value/],
    [
      'a non-integer',
      ['admin', 'create-access-token', '--client-id', 'x', '--lifetime-seconds', 'soon'],
      /--lifetime-seconds must be an integer/,
    ],
    [
      'a value out of its declared bounds',
      ['admin', 'create-access-token', '--client-id', 'x', '--lifetime-seconds', '0'],
      /--lifetime-seconds must be an integer from 1 to 31536000/,
    ],
    [
      'a misspelt flag',
      ['admin', 'create-access-token', '--lifetime-second', '60'],
      /unknown flag --lifetime-second for create-access-token \(did you mean --lifetime-seconds\?\)/,
    ],
    ['the master token as a flag', ['admin', 'list-clients', '--master-token', 'abc'], /never taken from a flag/],
    ["an unknown command (the sidecar's own usage error)", ['frobnicate'], /unknown argument "frobnicate"/],
    ['a bad token to hash', ['token', 'hash', 'ABC'], /not a token: expected 64 lowercase hex characters/],
    ['token without a subcommand', ['token'], /token commands/],
  ])('2 for %s', async (_name, args, message) => {
    const run = await cli(args, { env });
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toMatch(message);
  });

  it('2 when no master token is set and stdin is not a terminal (no prompt possible)', async () => {
    const run = await cli(['admin', 'list-clients'], { env: { ADMIN_URL: stack.adminUrl } });
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toContain('BEARER_SECRET_MASTER is not set and there is no terminal');
  });

  it('2 for a malformed master token, without echoing it', async () => {
    const run = await cli(['admin', 'list-clients'], { env: { ...env, BEARER_SECRET_MASTER: 'Not-A-Token-value' } });
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toContain('must be exactly 64 lowercase hex characters');
    expect(run.stderr).not.toContain('Not-A-Token-value');
  });
});

describe.concurrent('token helpers and help', () => {
  it('token generate prints a fresh 64-hex secret each time', async () => {
    const [a, b] = await Promise.all([cli(['token', 'generate']), cli(['token', 'generate'])]);
    expect(a.code).toBe(EXIT.ok);
    expect(a.stdout).toMatch(/^[0-9a-f]{64}\n$/);
    expect(b.stdout).toMatch(/^[0-9a-f]{64}\n$/);
    expect(a.stdout).not.toBe(b.stdout);
  });

  it('token hash <token> prints its SHA-256', async () => {
    const token = randomBytes(32).toString('hex');
    const run = await cli(['token', 'hash', token]);
    expect(run.code).toBe(EXIT.ok);
    expect(run.stdout).toBe(`${hashToken(token)}\n`);
  });

  it('--help lists every operation and the exit codes; <operation> --help its flags', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(EXIT.ok);
    for (const op of [
      'create-client',
      'list-clients',
      'delete-client',
      'seed-default-profiles',
      'create-access-token',
      'revoke-user-token',
      'list-audit-events',
    ]) {
      expect(help.stdout).toContain(op);
    }
    expect(help.stdout).toContain('exit codes');
    const opHelp = await cli(['admin', 'create-access-token', '--help']);
    expect(opHelp.code).toBe(EXIT.ok);
    expect(opHelp.stdout).toContain('--lifetime-seconds N');
  });

  it('without admin/token the same bin starts the sidecar (here: --check-config)', async () => {
    const run = await cli(['--check-config'], {
      env: { BEARER_SECRET_MASTER: randomBytes(32).toString('hex'), MCP_AUTH_CONFIG: 'config.yaml', REDIS_URL: redisUrl() },
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('configuration OK');
  });
});
