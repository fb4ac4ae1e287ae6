// Logs: no secret in any line of a full run of real traffic (every endpoint, every grant, refusals),
// redaction paths as the net under the code, one access line per request, and the two output formats.

import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessLogger, createLogger, formatPrettyLine, REDACT_PATHS, type AccessFields } from '../../src/observability/logger.ts';
import { runTraffic, startTrafficStack, type TrafficResult, type TrafficStack } from '../support/traffic.ts';

function capture(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(line);
      done();
    },
  });
  return { lines, stream };
}

describe('no secret in any log line of a full run', () => {
  let t: TrafficStack;
  let traffic: TrafficResult;

  beforeAll(async () => {
    t = await startTrafficStack();
    traffic = await runTraffic(t);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('neither a raw secret (master token, client secrets, tokens, JWTs) nor a full token hash appears', () => {
    const logs = t.stack.logs;
    expect(logs.length).toBeGreaterThan(40);
    expect(traffic.secrets.length).toBeGreaterThan(15);
    const text = logs.join('\n');
    for (const secret of traffic.secrets) expect(text.includes(secret), `a secret (${secret.slice(0, 6)}…) reached the logs`).toBe(false);
    for (const hash of traffic.hashes) expect(text.includes(hash), `a full token hash (${hash.slice(0, 8)}…) reached the logs`).toBe(false);
    // The check looked at real data: hash prefixes of issued tokens are there (audit events).
    expect(traffic.hashes.some((h) => text.includes(`"tokenHashPrefix":"${h.slice(0, 8)}"`))).toBe(true);
  });

  it('every line is one JSON object with a level, a time and a message', () => {
    for (const line of t.stack.logs) {
      const entry = JSON.parse(line) as Record<string, unknown>;
      expect(typeof entry.level).toBe('number');
      expect(typeof entry.time).toBe('string');
      expect(typeof entry.msg).toBe('string');
    }
  });

  it('one access line per proxy request: method, path, status, duration, auth kind, subject, clientId, outcome, denial, upstream status', () => {
    const access = t.stack.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.msg === 'request');
    expect(access.length).toBeGreaterThan(20);
    for (const e of access) {
      expect(typeof e.method).toBe('string');
      expect(typeof e.path).toBe('string');
      expect(typeof e.status).toBe('number');
      expect(typeof e.durationMs).toBe('number');
      // Each answer is named as it was counted (mcp_auth_requests_total).
      expect(typeof e.outcome, JSON.stringify(e)).toBe('string');
    }
    expect(
      access.some(
        (e) =>
          e.path === '/mcp' &&
          e.status === 200 &&
          e.authKind === 'oauth' &&
          e.subject === traffic.clientId &&
          e.clientId === traffic.clientId &&
          e.upstreamStatus === 200,
      ),
    ).toBe(true);
    // Refused requests never reached the upstream: no upstream status on their lines.
    expect(access.filter((e) => e.status === 401).every((e) => e.upstreamStatus === undefined)).toBe(true);
    expect(access.some((e) => e.path === '/mcp' && e.status === 200 && e.authKind === 'user' && e.subject === 'alice')).toBe(true);
    expect(access.some((e) => e.path === '/mcp' && e.status === 401 && e.denial === 'unknown')).toBe(true);
    expect(access.some((e) => e.path === '/mcp' && e.status === 401 && e.outcome === 'denied' && e.reason === 'unknown')).toBe(true);
    expect(access.some((e) => e.path === '/mcp' && e.upstreamStatus === 200 && e.outcome === 'forwarded' && e.reason === undefined)).toBe(
      true,
    );
    expect(access.some((e) => e.path === '/mcp' && e.status === 401 && e.denial === 'revoked')).toBe(true);
  });
});

describe('redaction paths', () => {
  const secret = 'f'.repeat(64);

  it.each([
    ['authorization', { authorization: `Bearer ${secret}` }],
    ['headers.authorization', { headers: { authorization: `Bearer ${secret}` } }],
    ['req.headers.authorization', { req: { headers: { authorization: `Bearer ${secret}` } } }],
    ['proxy-authorization', { headers: { 'proxy-authorization': `Basic ${secret}` } }],
    ['cookie', { headers: { cookie: `s=${secret}` } }],
    ['callerToken', { callerToken: secret }],
    ['body.callerToken', { body: { callerToken: secret } }],
    ['clientSecret', { clientSecret: secret }],
    ['client_secret', { form: { client_secret: secret } }],
    ['access_token', { response: { access_token: secret } }],
    ['refresh_token', { body: { refresh_token: secret } }],
    ['accessToken', { result: { accessToken: secret } }],
    ['token in a body', { body: { token: secret } }],
    ['subject_token', { form: { subject_token: secret } }],
    ['masterToken', { config: { masterToken: secret } }],
  ])('%s is redacted', (_name, payload) => {
    const { lines, stream } = capture();
    createLogger('debug', stream).info(payload, 'something');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain(secret);
    expect(lines[0]).toContain('[redacted]');
  });

  it('covers each secret field at the top level and one and two levels down', () => {
    for (const field of ['authorization', 'callerToken', 'client_secret', 'token']) {
      expect(REDACT_PATHS).toContain(field);
      expect(REDACT_PATHS).toContain(`*.${field}`);
      expect(REDACT_PATHS).toContain(`*.*.${field}`);
    }
  });

  it('the log level filters', () => {
    const { lines, stream } = capture();
    const logger = createLogger('warn', stream);
    logger.info('not shown');
    logger.debug('not shown');
    logger.warn('shown');
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['shown']);
  });
});

describe('output formats', () => {
  it('auto with an explicit destination is JSON; pretty is one readable line an event, redacted', () => {
    const json = capture();
    createLogger('info', json.stream, 'auto').info({ status: 200 }, 'request');
    expect(JSON.parse(json.lines[0]!)).toMatchObject({ msg: 'request', status: 200, service: 'mcp-bearer-proxy' });

    const pretty = capture();
    createLogger('info', pretty.stream, 'pretty').info(
      { method: 'POST', path: '/mcp', status: 401, denial: 'unknown', callerToken: 'a'.repeat(64) },
      'request',
    );
    expect(pretty.lines).toHaveLength(1);
    expect(pretty.lines[0]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}request method=POST path=\/mcp status=401 denial=unknown callerToken="\[redacted\]"$/,
    );
  });

  it('auto on a terminal stdout is pretty', () => {
    const descriptor = Object.getOwnPropertyDescriptor(process.stdout, 'isTTY');
    const written: string[] = [];
    const write = process.stdout.write;
    Object.defineProperty(process.stdout, 'isTTY', { value: true, configurable: true });
    process.stdout.write = ((chunk: string) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    try {
      createLogger('info', undefined, 'auto').warn({ err: { message: 'boom', code: 'ECONNRESET' } }, 'upstream request failed');
    } finally {
      process.stdout.write = write;
      if (descriptor) Object.defineProperty(process.stdout, 'isTTY', descriptor);
      else delete (process.stdout as { isTTY?: boolean }).isTTY;
    }
    expect(written).toHaveLength(1);
    // Colours on a terminal; without them the line reads: TIME WARN  message err=... code=...
    const plain = written[0]!.replace(/\x1b\[[0-9;]*m/g, '');
    expect(plain).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}upstream request failed err=boom code=ECONNRESET\n$/);
  });

  it('formatPrettyLine passes a non-JSON line through and shows nested objects compactly', () => {
    expect(formatPrettyLine('plain text')).toBe('plain text\n');
    const line = JSON.stringify({
      level: 30,
      time: '2026-01-01T12:34:56.789Z',
      msg: 'audit',
      audit: { who: 'master', action: 'createClient', result: 'ok' },
    });
    expect(formatPrettyLine(line)).toBe('12:34:56.789 INFO  audit audit={who:master,action:createClient,result:ok}\n');
  });
});

describe('access lines not to stdout', () => {
  const fields: AccessFields = {
    method: 'POST',
    path: '/mcp',
    status: 401,
    durationMs: 0.25,
    authKind: undefined,
    subject: undefined,
    clientId: undefined,
    outcome: 'denied',
    reason: 'unknown',
    denial: 'unknown',
    dpopRefusal: undefined,
    upstreamStatus: undefined,
    aborted: true,
    endedBy: undefined,
  };

  it('to a destination of the caller: logged through pino, the fields in order, absent ones left out', () => {
    const { lines, stream } = capture();
    const access = accessLogger(createLogger('info', stream, 'json'));
    expect(access.enabled).toBe(true);
    access.write(fields);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\{"level":30,"time":"[^"]+","service":"mcp-bearer-proxy","method":"POST","path":"\/mcp","status":401,"durationMs":0.25,"outcome":"denied","reason":"unknown","denial":"unknown","aborted":true,"msg":"request"\}$/,
    );
  });

  it('pretty: one readable line', () => {
    const { lines, stream } = capture();
    accessLogger(createLogger('info', stream, 'pretty')).write(fields);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}request method=POST path=\/mcp status=401 durationMs=0.25 outcome=denied reason=unknown denial=unknown aborted=true$/,
    );
  });

  it('a level above info: none', () => {
    const { lines, stream } = capture();
    const access = accessLogger(createLogger('warn', stream, 'json'));
    expect(access.enabled).toBe(false);
    access.write(fields);
    expect(lines).toEqual([]);
  });
});
