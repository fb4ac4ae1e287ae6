// A misconfigured upstream is visible: a stopped upstream, a wrong host, https against a plain server
// and a wrong path each give a warn line with the cause and a hint (at most one per cause and interval),
// and the start-up probe warns about an unreachable upstream or a 404 at the MCP path, as a real process.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { generateToken } from '../../src/model/credentials.ts';
import { describeUpstreamFailure, PROBE_USER_AGENT, probeMcpEndpoint, UPSTREAM_WARN_INTERVAL_MS } from '../../src/proxy/upstream-check.ts';
import { postMcp } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { RUN_TS } from '../support/node-ts.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** A plain HTTP server answering every request with `status`. */
async function answering(status: number): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(status, { 'content-type': 'text/plain' }).end('not here');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function warnLines(stack: Stack): Array<Record<string, any>> {
  return stack.logs.map((l) => JSON.parse(l) as Record<string, any>).filter((e) => e.msg === 'upstream request failed: answered 502');
}

async function mcp(stack: Stack, token: string): Promise<number> {
  return (await postMcp(stack.mcpUrl, token)).status;
}

describe('a 502 is logged with its cause', () => {
  let stack: Stack | undefined;
  const servers: Server[] = [];
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  });

  it('a stopped upstream: one warn line with ECONNREFUSED and a hint, then silence until the interval has passed', async () => {
    const port = await closedPort();
    stack = await startStack({ upstreamUrl: `http://127.0.0.1:${port}/mcp` });
    const { token } = await stack.issueOAuthToken();
    for (let i = 0; i < 5; i++) expect(await mcp(stack, token)).toBe(502);
    let lines = warnLines(stack);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, upstream: `http://127.0.0.1:${port}/mcp`, err: { code: 'ECONNREFUSED' } });
    expect(lines[0]!.hint).toContain(`nothing listens on 127.0.0.1:${port}`);
    expect(JSON.stringify(lines[0])).not.toContain(token);

    stack.clock.advance(UPSTREAM_WARN_INTERVAL_MS);
    expect(await mcp(stack, token)).toBe(502);
    lines = warnLines(stack);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ err: { code: 'ECONNREFUSED' }, suppressed: 4 });
  });

  it('https:// against a plain HTTP upstream: the hint says to use http://', async () => {
    const plain = await answering(200);
    servers.push(plain.server);
    stack = await startStack({ upstreamUrl: `${plain.origin.replace('http:', 'https:')}/mcp` });
    const { token } = await stack.issueOAuthToken();
    expect(await mcp(stack, token)).toBe(502);
    const lines = warnLines(stack);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.hint).toMatch(/UPSTREAM_URL must start with http:\/\//);
  });

  it('a host name that does not resolve: the hint names the host', async () => {
    stack = await startStack({ upstreamUrl: 'http://no-such-host.invalid:3000/mcp' });
    const { token } = await stack.issueOAuthToken();
    expect(await mcp(stack, token)).toBe(502);
    const lines = warnLines(stack);
    expect(lines).toHaveLength(1);
    expect(['ENOTFOUND', 'EAI_AGAIN']).toContain(lines[0]!.err.code);
    expect(lines[0]!.hint).toContain('no-such-host.invalid does not resolve');
  });
});

describe('describeUpstreamFailure', () => {
  const err = (code: string, message = code) => Object.assign(new Error(message), { code });
  it.each([
    ['http://up:3000/mcp', err('ECONNREFUSED'), /nothing listens on up:3000/],
    ['http://up/mcp', err('ECONNREFUSED'), /nothing listens on up:80/],
    ['https://up/mcp', err('ERR_SSL_WRONG_VERSION_NUMBER', 'wrong version number'), /must start with http:\/\//],
    ['https://up/mcp', err('EPROTO', 'ssl3_get_record:wrong version number'), /must start with http:\/\//],
    ['https://up/mcp', err('DEPTH_ZERO_SELF_SIGNED_CERT'), /certificate is not trusted/],
    ['http://up:443/mcp', err('HPE_INVALID_CONSTANT'), /must start with https:\/\//],
    ['http://up:443/mcp', err('ECONNRESET'), /must start with https:\/\//],
    ['http://up/mcp', err('EHOSTUNREACH'), /cannot be reached from here/],
  ])('%s %s', (url, e, hint) => {
    expect(describeUpstreamFailure(e, url).hint).toMatch(hint);
  });

  it('an error without a code has no hint', () => {
    expect(describeUpstreamFailure(new Error('boom'), 'http://up/mcp')).toEqual({ code: 'unknown', message: 'boom', hint: undefined });
  });
});

describe('the start-up probe', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  });

  it('a 404 at the MCP path is reported; any other answer is fine', async () => {
    let userAgent: string | undefined;
    const missing = await answering(404);
    missing.server.on('request', (req: import('node:http').IncomingMessage) => (userAgent = req.headers['user-agent']));
    const there = await answering(400);
    servers.push(missing.server, there.server);
    expect(await probeMcpEndpoint(`${missing.origin}/mpc`, 2000)).toMatch(
      /answers http:\/\/127\.0\.0\.1:\d+\/mpc with 404: UPSTREAM_URL must name the MCP endpoint/,
    );
    expect(await probeMcpEndpoint(`${there.origin}/mcp`, 2000)).toBeUndefined();
    expect(userAgent).toBe(PROBE_USER_AGENT);
  });

  it('the reference upstream passes', async () => {
    const { startUpstream } = await import('../../examples/upstream/server.ts');
    const upstream = await startUpstream({ host: '127.0.0.1', port: 0 });
    try {
      expect(await probeMcpEndpoint(upstream.url, 2000)).toBeUndefined();
    } finally {
      await upstream.close();
    }
  });

  it('an unreachable upstream is reported with the cause', async () => {
    const port = await closedPort();
    expect(await probeMcpEndpoint(`http://127.0.0.1:${port}/mcp`, 2000)).toMatch(
      /cannot be reached \(ECONNREFUSED: .*nothing listens on 127\.0\.0\.1:\d+/,
    );
  });

  it('the sidecar process warns at start-up, and serves anyway', async () => {
    const port = await closedPort();
    const child = spawn(
      process.execPath,
      [
        ...RUN_TS,
        'src/entry/main.ts',
        '--store',
        'memory',
        '--proxy.host',
        '127.0.0.1',
        '--proxy.port',
        '0',
        '--admin.port',
        '0',
        '--upstream.url',
        `http://127.0.0.1:${port}/mcp`,
      ],
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', BEARER_SECRET_MASTER: generateToken(), LOG_FORMAT: 'json' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let out = '';
      const warned = new Promise<Record<string, any>>((resolve, reject) => {
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          out += chunk;
          const line = out.split('\n').find((l) => l.includes('start-up probe'));
          if (line) resolve(JSON.parse(line) as Record<string, any>);
        });
        child.once('exit', (code) => reject(new Error(`exited ${code} before warning: ${out}`)));
      });
      const warning = await warned;
      expect(warning.level).toBe(40);
      expect(warning.msg).toMatch(/cannot be reached \(ECONNREFUSED/);
      expect(out).toMatch(/proxy listening on http:\/\/127\.0\.0\.1:\d+/);
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null) await once(child, 'exit');
    }
  }, 30_000);
});
