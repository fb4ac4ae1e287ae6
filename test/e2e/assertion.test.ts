// Caller assertions end to end: two sidecar processes on one Redis (two replicas, each with its own
// generated key) verified by one reference upstream through one JWKS fetch; and the verification
// examples an upstream author pastes (examples/assertion: Node with jose, Python with Debian's PyJWT,
// Go with Debian's go-jose), each run as its own program against a real sidecar's assertions and
// against forged, expired, wrong-audience and `alg: none` ones.

import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decodeJwt, decodeProtectedHeader, SignJWT, type JWK } from 'jose';
import { startUpstream, type RunningUpstream } from '../../examples/upstream/server.ts';
import { JWKS_PATH } from '../../src/assertion/jwks.ts';
import { PROBE_USER_AGENT } from '../../src/proxy/upstream-check.ts';
import { initializeRequest, postMcp } from '../support/http.ts';
import { startSidecarProcess, type SidecarProcess } from '../support/process.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { nodeTs } from '../support/node-ts.ts';

const SIDECAR = nodeTs('src/entry/main.ts');
const PUBLIC_URL = 'http://mcp.example.test';

describe('two sidecar processes on one Redis, one upstream', () => {
  let upstream: RunningUpstream;
  let a: SidecarProcess;
  let b: SidecarProcess;

  beforeAll(async () => {
    upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      HOST: '127.0.0.1',
      PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      UPSTREAM_URL: upstream.url,
      UPSTREAM_ASSERTION: 'true',
      PUBLIC_URL,
    };
    a = await startSidecarProcess('assertion-a', SIDECAR, env);
    b = await startSidecarProcess('assertion-b', SIDECAR, env, [], a);
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
    await a?.cleanup();
    await upstream?.close();
  });

  it('each signs with its own key; the upstream verifies both after one JWKS fetch (through either replica)', async () => {
    // Each replica's start-up probe carries no identity: let both arrive before the check is on.
    const probes = () => upstream.seenHeaders.filter((h) => h['user-agent'] === PROBE_USER_AGENT).length;
    await expect.poll(probes, { timeout: 20_000 }).toBe(2);
    // A cooldown longer than the test: a key missing from the first fetch could not be fetched later.
    upstream.requireAssertions({
      jwksUrl: `${a.proxyUrl}${JWKS_PATH}`,
      issuer: PUBLIC_URL,
      audience: new URL(upstream.url).origin,
      jwks: { cooldownDuration: 600_000 },
    });
    const { clientId } = (await a.admin('createClient', { clientName: 'replicas' })).body;
    const { accessToken } = (await a.admin('createAccessToken', { clientId, lifetimeSeconds: 600 })).body;

    const kids: string[] = [];
    for (const replica of [a, b]) {
      const answer = await postMcp(`${replica.proxyUrl}/mcp`, accessToken, { body: JSON.stringify(initializeRequest()) });
      expect(answer.status).toBe(200);
      const assertion = upstream.seenHeaders.at(-1)!['x-mcp-auth-assertion'] as string;
      expect(decodeJwt(assertion)).toMatchObject({ iss: PUBLIC_URL, sub: clientId, mcp_kind: 'oauth' });
      kids.push(decodeProtectedHeader(assertion).kid!);
    }
    expect(new Set(kids).size).toBe(2);
    expect(upstream.assertions).toEqual({ verified: 2, refused: [], jwksFetches: 1 });
    // Either replica's JWKS lists both keys (public halves only).
    for (const replica of [a, b]) {
      const listed = ((await (await fetch(`${replica.proxyUrl}${JWKS_PATH}`)).json()) as { keys: JWK[] }).keys;
      expect(listed.map((k) => k.kid).sort()).toEqual([...kids].sort());
      for (const key of listed) expect(key).not.toHaveProperty('d');
    }
    for (const replica of [a, b]) expect(replica.output()).toMatch(/assertion signing key published/);
  });
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program with `input` on stdin (asynchronously: the sidecar it fetches the JWKS from is in this process). */
function run(argv: string[], input: string, env: NodeJS.ProcessEnv = process.env): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** Debian's python3 (python3-jwt, python3-cryptography), not whatever python3 comes first on PATH. */
const PYTHON = '/usr/bin/python3';
const GO = '/usr/bin/go';
/** Debian's go-jose (golang-gopkg-square-go-jose.v2-dev), in GOPATH mode: no module download. */
const GO_ENV = { ...process.env, GO111MODULE: 'off', GOPATH: '/usr/share/gocode', GOFLAGS: '' };

/**
 * Whether a verifier's toolchain is here; its tests are skipped when it is not. With REQUIRE_VERIFIERS
 * set (.ci/run sets it, after installing both) a missing one is an error instead: a skip there would
 * hide a broken install.
 */
function verifierAvailable(binary: string): boolean {
  const found = existsSync(binary);
  if (!found && process.env.REQUIRE_VERIFIERS)
    throw new Error(`${binary} is not installed (.ci/run installs python3 with PyJWT and golang-go with go-jose)`);
  return found;
}

describe('the verification examples, against a real sidecar', () => {
  let stack: Stack;
  let jwksUrl: string;
  let issuer: string;
  let audience: string;
  let token: string;
  let goBinary: string | undefined;
  let goDir: string | undefined;

  beforeAll(async () => {
    stack = await startStack({ config: { upstream: { assertion: true } } });
    jwksUrl = `${stack.proxyUrl}${JWKS_PATH}`;
    issuer = stack.sidecar.publicUrl();
    audience = new URL(stack.upstream!.url).origin;
    token = (await stack.issueOAuthToken()).token;
    if (verifierAvailable(GO)) {
      goDir = mkdtempSync(join(tmpdir(), 'verify-assertion-go-'));
      goBinary = join(goDir, 'verify_assertion');
      const built = await run([GO, 'build', '-o', goBinary, 'examples/assertion/go/verify_assertion.go'], '', GO_ENV);
      expect(built.stderr).toBe('');
      expect(built.code).toBe(0);
    }
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
    if (goDir) rmSync(goDir, { recursive: true, force: true });
  });

  const examples: Array<[name: string, available: () => boolean, argv: () => string[]]> = [
    ['Node (jose)', () => true, () => nodeTs('examples/assertion/node/verify-assertion.ts')],
    ['Python (PyJWT)', () => verifierAvailable(PYTHON), () => [PYTHON, 'examples/assertion/python/verify_assertion.py']],
    ['Go (go-jose)', () => verifierAvailable(GO), () => [goBinary!]],
  ];

  /**
   * A fresh assertion from the sidecar, signed now: each example runs for seconds on a loaded machine,
   * longer than an assertion signed at the start would live.
   */
  async function realAssertion(): Promise<string> {
    await syncClock();
    await postMcp(stack.mcpUrl, token);
    return stack.upstream!.seenHeaders.at(-1)!['x-mcp-auth-assertion'] as string;
  }
  /** The stack's clock to real time, and the key's listing renewed from there (the programs' JWKS fetches). */
  async function syncClock(): Promise<void> {
    stack.clock.set(Date.now());
    await stack.sidecar.assertions!.keys.tick();
  }
  // Crafted assertions are dated by the real clock: the programs check them against it.
  const now = () => Math.floor(Date.now() / 1000);
  const claims = () => ({ iss: issuer, aud: audience, sub: 'mallory', mcp_kind: 'master', iat: now(), exp: now() + 60, jti: 'j' });
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const realKey = () => stack.sidecar.assertions!.keys.current();
  const refused: Array<[string, () => Promise<string>]> = [
    [
      'expired 10 minutes ago (the real key)',
      () =>
        new SignJWT({ ...claims(), iat: now() - 660, exp: now() - 600 })
          .setProtectedHeader({ alg: 'ES256', kid: realKey().kid })
          .sign(realKey().privateKey),
    ],
    [
      'forged (another key, the real kid)',
      () =>
        new SignJWT(claims())
          .setProtectedHeader({ alg: 'ES256', kid: realKey().kid })
          .sign(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey),
    ],
    [
      'for another audience (the real key)',
      () =>
        new SignJWT({ ...claims(), aud: 'http://another-upstream:3000' })
          .setProtectedHeader({ alg: 'ES256', kid: realKey().kid })
          .sign(realKey().privateKey),
    ],
    ['alg none', async () => `${b64({ alg: 'none', kid: realKey().kid, typ: 'JWT' })}.${b64(claims())}.`],
  ];

  describe.each(examples)('%s', (name, available, argv) => {
    beforeEach(syncClock);

    it.skipIf(!available())("accepts the sidecar's assertion and prints its claims", async () => {
      const real = await realAssertion();
      const ran = await run([...argv(), jwksUrl, issuer, audience], real);
      expect(ran.stderr, name).toBe('');
      expect(ran.code).toBe(0);
      const printed = JSON.parse(ran.stdout) as Record<string, unknown>;
      expect(printed).toMatchObject({ iss: issuer, sub: decodeJwt(real).sub, mcp_kind: 'oauth', client_id: decodeJwt(real).client_id });
    });

    it.skipIf(!available())('refuses the real assertion when it expects another audience or issuer', async () => {
      for (const [iss, aud] of [
        [issuer, 'http://another-upstream:3000'],
        ['https://evil.example', audience],
      ]) {
        const ran = await run([...argv(), jwksUrl, iss!, aud!], await realAssertion());
        expect(ran.code, `${iss} ${aud}`).toBe(1);
        expect(ran.stderr).toMatch(/^refused: /);
      }
    });

    it.skipIf(!available()).each(refused)('refuses one %s', async (_case, make) => {
      const ran = await run([...argv(), jwksUrl, issuer, audience], await make());
      expect(ran.code).toBe(1);
      expect(ran.stdout).toBe('');
      expect(ran.stderr).toMatch(/^refused: /);
    });
  });
});
