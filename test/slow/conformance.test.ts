// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) run against an
// "everything" upstream three times: directly; through the sidecar in proxy mode with a real token; and
// through a sidecar with a per-tool policy, which parses every POST body and filters list answers (JSON
// and SSE). The sidecar must be invisible to MCP traffic: every server scenario passes directly, and
// through either sidecar each check ends exactly as it did directly (same checks, same outcomes).
//
// Not run here: the suite's client scenarios (`conformance list --client`: initialize, tools_call,
// sse-retry, elicitation-sep1034-client-defaults and all of auth/*). They run an MCP client under test
// against a mock server the suite starts; the sidecar is a server, not a client, so they do not apply.
// Nor `conformance tier-check`, which assesses an SDK's GitHub repository over the network.

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConformanceUpstream, type ConformanceUpstream } from '../support/conformance-upstream.ts';
import { startCredentialForwarder, type CredentialForwarder } from '../support/credential-forwarder.ts';
import { RUN_TS } from '../support/node-ts.ts';
import { postMcp } from '../support/http.ts';
import { startStack, type Stack } from '../support/stack.ts';

const CLI = resolve('node_modules/@modelcontextprotocol/conformance/dist/index.js');
const LOOPBACK_ONLY = resolve('test/support/loopback-only.ts');

/**
 * Every server scenario of the pinned version, as `conformance list --server` prints them; a test below
 * fails when the list changes (a new version), so a new scenario is never silently skipped.
 */
const SERVER_SCENARIOS = [
  'server-initialize',
  'logging-set-level',
  'ping',
  'completion-complete',
  'tools-list',
  'tools-call-simple-text',
  'tools-call-image',
  'tools-call-audio',
  'tools-call-embedded-resource',
  'tools-call-mixed-content',
  'tools-call-with-logging',
  'tools-call-error',
  'tools-call-with-progress',
  'tools-call-sampling',
  'tools-call-elicitation',
  'json-schema-2020-12',
  'elicitation-sep1034-defaults',
  'server-sse-polling',
  'server-sse-multiple-streams',
  'elicitation-sep1330-enums',
  'resources-list',
  'resources-read-text',
  'resources-read-binary',
  'resources-templates-read',
  'resources-subscribe',
  'resources-unsubscribe',
  'prompts-list',
  'prompts-get-simple',
  'prompts-get-with-args',
  'prompts-get-embedded-resource',
  'prompts-get-with-image',
  'dns-rebinding-protection',
];

/**
 * Scenarios allowed to fail, each with the reason; the same failure must then show directly and through
 * the sidecar (the sidecar adds none). Empty: every server scenario passes both ways.
 */
const EXPECTED_FAILURES: Readonly<Record<string, string>> = {};

/** One whole-suite run (all 32 scenarios, a few seconds unloaded) may take this long before it is killed. */
const RUN_TIMEOUT_MS = 150_000;

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  errorMessage?: string;
  details?: Record<string, unknown>;
}

interface SuiteRun {
  /** Scenario name -> its checks (checks.json), for every scenario the run got to. */
  checks: Map<string, Check[]>;
  /** Every outgoing connection the CLI opened (test/support/loopback-only.ts). */
  connections: Array<{ host?: string; port?: number; path?: string; allowed: boolean }>;
  output: string;
}

interface CliResult {
  code: number | null;
  output: string;
}

/** The CLI under the loopback-only guard, killed (and the run failed) after RUN_TIMEOUT_MS. */
function runCli(args: string[], connectionsLog: string): Promise<CliResult> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [...RUN_TS, '--import', LOOPBACK_ONLY, CLI, ...args], {
      env: { ...process.env, LOOPBACK_ONLY_LOG: connectionsLog, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => void (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => void (output += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`conformance ${args.join(' ')} still running after ${RUN_TIMEOUT_MS} ms: killed\n${output}`));
    }, RUN_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      fail(err);
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      done({ code, output });
    });
  });
}

const RESULT_DIR = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;

/** Runs every server scenario (`--suite all`: the pending ones too) against `url`, results in `dir`. */
async function runSuite(url: string, dir: string): Promise<SuiteRun> {
  const connectionsLog = join(dir, 'connections.jsonl');
  writeFileSync(connectionsLog, '');
  const resultsDir = join(dir, 'results');
  const { output } = await runCli(['server', '--url', url, '--suite', 'all', '-o', resultsDir], connectionsLog);
  const checks = new Map<string, Check[]>();
  for (const entry of readdirSync(resultsDir)) {
    const scenario = RESULT_DIR.exec(entry)?.[1];
    if (scenario === undefined) throw new Error(`unexpected entry in the CLI's output directory: ${entry}`);
    if (checks.has(scenario)) throw new Error(`scenario ${scenario} has two result directories`);
    checks.set(scenario, JSON.parse(readFileSync(join(resultsDir, entry, 'checks.json'), 'utf8')) as Check[]);
  }
  const connections = readFileSync(connectionsLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as SuiteRun['connections'][number]);
  return { checks, connections, output };
}

/** What a run concluded per check: id and outcome, in order (INFO entries are traffic logs, not outcomes). */
function outcomes(checks: Check[]): string[] {
  return checks.filter((c) => c.status !== 'INFO').map((c) => `${c.id}: ${c.status}`);
}

function failures(checks: Check[]): string[] {
  return checks.filter((c) => c.status === 'FAILURE').map((c) => `${c.id}: ${c.errorMessage ?? 'failed'}`);
}

function verdict(checks: Check[] | undefined): string {
  if (checks === undefined) return 'not run';
  const failed = checks.filter((c) => c.status === 'FAILURE').length;
  const warned = checks.filter((c) => c.status === 'WARNING').length;
  const passed = checks.filter((c) => c.status === 'SUCCESS').length;
  return failed > 0 ? `FAIL (${failed} failed)` : `pass (${passed} ok${warned ? `, ${warned} warnings` : ''})`;
}

describe('MCP conformance suite (server scenarios): directly and through the sidecar', () => {
  let upstream: ConformanceUpstream;
  let stack: Stack;
  let policedStack: Stack;
  // The CLI has no option to send an Authorization header (`conformance server --help`): this forwarder
  // plays the client's credential store, adding the token the sidecar issued, and passes every other
  // header unchanged; dns-rebinding-protection sends its own Host and Origin, which must reach the
  // sidecar as sent.
  let forwarder: CredentialForwarder;
  let policedForwarder: CredentialForwarder;
  let workDir: string;
  let direct: SuiteRun;
  let proxied: SuiteRun;
  let policed: SuiteRun;

  beforeAll(
    async () => {
      workDir = mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
      upstream = await startConformanceUpstream();
      stack = await startStack({ upstreamUrl: upstream.url });
      const { token } = await stack.issueOAuthToken();
      forwarder = await startCredentialForwarder(stack.mcpUrl, token);
      // Deny by default, as a policed deployment would, with one rule that lets OAuth tokens make every
      // call: nothing the scenarios do is refused, and every body and list answer goes through the policy.
      policedStack = await startStack({
        upstreamUrl: upstream.url,
        config: { policy: { default: 'deny', rules: [{ name: 'oauth-clients', effect: 'allow', principals: { kinds: ['oauth'] } }] } },
      });
      const { token: policedToken } = await policedStack.issueOAuthToken();
      policedForwarder = await startCredentialForwarder(policedStack.mcpUrl, policedToken);
      // One after the other: a few scenarios give the server a fixed time (server-sse-multiple-streams
      // waits 2 s for each stream's first event), so the runs do not compete for the machine.
      direct = await runSuite(upstream.url, mkdtempSync(join(workDir, 'direct-')));
      proxied = await runSuite(forwarder.url, mkdtempSync(join(workDir, 'sidecar-')));
      policed = await runSuite(policedForwarder.url, mkdtempSync(join(workDir, 'policy-')));
    },
    3 * RUN_TIMEOUT_MS + 60_000,
  );

  afterAll(async () => {
    if (direct && proxied && policed) {
      // The table for the CI log: scenario, directly, through the sidecar, through the policed
      // sidecar, why a failure is expected.
      const header = ['scenario', 'directly', 'sidecar', 'sidecar + policy', ''];
      const rows = [
        header,
        ...SERVER_SCENARIOS.map((s) => [
          s,
          ...[direct, proxied, policed].map((run) => verdict(run.checks.get(s))),
          EXPECTED_FAILURES[s] ?? '',
        ]),
      ];
      const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
      console.log(rows.map((r) => r.map((cell, i) => (i < 4 ? cell.padEnd(widths[i]!) : cell)).join('  ')).join('\n'));
    }
    await policedForwarder?.close();
    await policedStack?.close();
    await forwarder?.close();
    await stack?.close();
    await upstream?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it('the pinned CLI lists exactly the server scenarios this test checks', async () => {
    const connectionsLog = join(workDir, 'list-connections.jsonl');
    writeFileSync(connectionsLog, '');
    const { code, output } = await runCli(['list', '--server'], connectionsLog);
    expect(code).toBe(0);
    const listed = [...output.matchAll(/^ {2}- (\S+)/gm)].map((m) => m[1]);
    expect(listed).toEqual(SERVER_SCENARIOS);
  });

  it('every expected failure names a scenario of the list', () => {
    for (const scenario of Object.keys(EXPECTED_FAILURES)) expect(SERVER_SCENARIOS).toContain(scenario);
  });

  describe.each(SERVER_SCENARIOS)('%s', (scenario) => {
    it('passes against the upstream directly (unless expected to fail)', () => {
      const checks = direct.checks.get(scenario);
      expect(checks, `no results for ${scenario}:\n${direct.output}`).toBeDefined();
      expect(checks!.some((c) => c.status === 'SUCCESS')).toBe(true);
      if (EXPECTED_FAILURES[scenario] === undefined) expect(failures(checks!)).toEqual([]);
      else expect(failures(checks!)).not.toEqual([]);
    });

    it('ends every check through the sidecar as it ended directly', () => {
      const checks = proxied.checks.get(scenario);
      expect(checks, `no results for ${scenario}:\n${proxied.output}`).toBeDefined();
      expect(outcomes(checks!)).toEqual(outcomes(direct.checks.get(scenario)!));
    });

    it('ends every check through the sidecar with a policy as it ended directly', () => {
      const checks = policed.checks.get(scenario);
      expect(checks, `no results for ${scenario}:\n${policed.output}`).toBeDefined();
      expect(outcomes(checks!)).toEqual(outcomes(direct.checks.get(scenario)!));
    });
  });

  it('dns-rebinding-protection: the sidecar itself refuses the foreign Host (421), the upstream never sees it', () => {
    const rejected = (run: SuiteRun) =>
      run.checks.get('dns-rebinding-protection')!.find((c) => c.id === 'localhost-host-rebinding-rejected')!;
    // Directly, the upstream's own check answers (403); through the sidecar, its DNS rebinding check
    // does (421), which it can only do if Host: evil.example.com reached it unchanged.
    expect(rejected(direct).details?.statusCode).toBe(403);
    for (const run of [proxied, policed]) {
      expect(rejected(run).details?.statusCode).toBe(421);
      expect(rejected(run).details?.hostHeader).toBe('evil.example.com');
    }
  });

  it('server-sse-polling: the stream closed mid-call and the result came on the resumed GET, through the sidecar too', () => {
    for (const run of [direct, proxied, policed]) {
      const checks = run.checks.get('server-sse-polling')!;
      const resume = checks.find((c) => c.id === 'server-sse-disconnect-resume');
      expect(resume?.status).toBe('SUCCESS');
      expect(resume?.details?.lastEventIdUsed).toEqual(expect.any(String));
    }
  });

  it('the policy was in force in the policed sidecar: a call it does not allow is refused there', async () => {
    // The master token is not an OAuth token, so no rule allows its tools/call whatever scope it held:
    // the policy answers it itself, before the upstream (no session needed), as a tool error.
    const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } });
    const refused = await postMcp(policedStack.mcpUrl, policedStack.masterToken, { body: call });
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({
      id: 1,
      result: {
        isError: true,
        _meta: { 'io.modelcontextprotocol/authorization': { reason: 'insufficient_authorization', remediation: 'unavailable' } },
      },
    });
  });

  it('the CLI connected to loopback addresses only', () => {
    for (const run of [direct, proxied, policed]) {
      // Not vacuous: the runs reached the server under test.
      expect(run.connections.length).toBeGreaterThan(0);
      expect(run.connections.filter((c) => !c.allowed)).toEqual([]);
    }
  });
});

describe('the loopback-only guard the CLI runs under', () => {
  it('refuses, and records, a connection to an address beyond loopback', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'loopback-only-'));
    try {
      const log = join(dir, 'connections.jsonl');
      writeFileSync(log, '');
      // 192.0.2.1 is TEST-NET-1 (RFC 5737), reserved for documentation: never a real host. The guard
      // refuses before the socket connects, so nothing leaves the machine either way.
      const script = `fetch('http://192.0.2.1:8080/').then(() => process.exit(3), (e) => { console.log(String(e.cause ?? e)); process.exit(0); })`;
      const child = spawn(process.execPath, [...RUN_TS, '--import', LOOPBACK_ONLY, '--input-type=module', '-e', script], {
        env: { ...process.env, LOOPBACK_ONLY_LOG: log },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => void (output += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => void (output += d));
      const code = await new Promise<number | null>((done) => child.on('exit', done));
      expect(code, output).toBe(0);
      expect(output).toContain('loopback-only: refused a connection to 192.0.2.1:8080');
      const recorded = readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
      expect(recorded).toEqual([{ host: '192.0.2.1', port: 8080, allowed: false }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
