// The sidecar's stdout log output as a log shipper reads it: real processes writing through the real
// destination (pino over sonic-boom on fd 1) into a pipe, as under a container runtime.
// - Lines go out in batches, not one write() per line: each asynchronous write is a round trip through
//   libuv's thread pool, and one per access line cost a busy proxy more than one context switch per request.
// - A batch is never held back by quiet: a lone line is written within the flush interval.
// - Whole lines only, and within PIPE_BUF when other processes share the pipe (worker processes).
// - Nothing is lost when the process exits right after logging.
// - The start-up lines (`proxy listening on ...`) keep their place after the log lines before them.
// - The access line, serialised straight into the stdout stage, is byte for byte what pino writes for
//   the same fields, in its place among the other lines.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { ATOMIC_WRITE_BYTES, createLogger } from '../../src/observability/logger.ts';
import { ACCESS_CASES, PINNED_NOW } from '../support/access-cases.ts';
import { nodeTs } from '../support/node-ts.ts';
import { spawnProcess } from '../support/process.ts';

const CHILD = 'test/support/log-child.ts';

interface Report {
  writes: number;
  maxBytes: number;
  lineEnds: boolean;
}

/** The child run to its exit: its code and its stdout and stderr apart (the process helper's output interleaves them). */
async function runToExit(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const started = spawnProcess(nodeTs(CHILD, ...args), process.env);
  const out = { stdout: '', stderr: '' };
  started.child.stdout.on('data', (chunk: string) => (out.stdout += chunk));
  started.child.stderr.on('data', (chunk: string) => (out.stderr += chunk));
  return { code: await started.exit, ...out };
}

/**
 * The child while it runs: once its output (both streams, checked at each chunk) satisfies `ready`,
 * `check` gets its stdout alone; the child is killed after.
 */
async function whileRunning(mode: string, ready: (output: string) => boolean, check: (stdout: string) => void): Promise<void> {
  const started = spawnProcess(nodeTs(CHILD, mode), process.env);
  let stdout = '';
  started.child.stdout.on('data', (chunk: string) => (stdout += chunk));
  try {
    await started.waitFor(ready);
    expect(started.child.exitCode).toBeNull();
    check(stdout);
  } finally {
    started.child.kill('SIGKILL');
    await started.exit;
  }
}

function lines(stdout: string): Array<{ msg: string; n: number }> {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{"level"'))
    .map((l) => JSON.parse(l) as { msg: string; n: number });
}

function report(output: string): Report {
  const line = output.split('\n').find((l) => l.startsWith('{"writes"'));
  if (line === undefined) throw new Error(`no report in:\n${output.slice(-500)}`);
  return JSON.parse(line) as Report;
}

describe('stdout log output', () => {
  it('a lone line is written without more logging and without the process ending', async () => {
    await whileRunning(
      'lone',
      (output) => output.includes('"msg":"lone line"'),
      (stdout) => expect(lines(stdout)).toEqual([expect.objectContaining({ msg: 'lone line', n: 0 })]),
    );
  });

  it('lines logged one a turn go out in a few writes of whole lines, every line once and in order', async () => {
    const count = 2000;
    const run = await runToExit('burst', String(count));
    expect(run.code).toBe(0);
    expect(lines(run.stdout).map((l) => l.n)).toEqual(Array.from({ length: count }, (_, n) => n));
    const { writes, lineEnds } = report(run.stderr);
    // About 280 bytes a line, written 8 KiB or more at a time: about 70 writes, not 2,000.
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThan(count / 10);
    expect(lineEnds).toBe(true);
  });

  it('shared with other processes, every write is whole lines within PIPE_BUF', async () => {
    const count = 500;
    const run = await runToExit('burst', String(count), 'shared');
    expect(run.code).toBe(0);
    expect(lines(run.stdout)).toHaveLength(count);
    const { writes, maxBytes, lineEnds } = report(run.stderr);
    expect(maxBytes).toBeLessThanOrEqual(ATOMIC_WRITE_BYTES);
    expect(lineEnds).toBe(true);
    expect(writes).toBeLessThan(count / 4);
  });

  it('the start-up lines written after a log line come after it on stdout', async () => {
    await whileRunning(
      'listening',
      (output) => output.includes('admin listening on'),
      (stdout) => {
        const out = stdout.split('\n');
        const warning = out.findIndex((l) => l.includes('"msg":"a start-up warning"'));
        expect(warning).toBeGreaterThanOrEqual(0);
        expect(warning).toBeLessThan(out.findIndex((l) => l.startsWith('proxy listening on')));
      },
    );
  });

  it('lines longer than a write (a log line, an access line) go out whole, in order with the lines after them', async () => {
    await whileRunning(
      'big',
      (output) => output.includes('after the big line'),
      (stdout) => {
        const out = stdout.split('\n');
        expect(out.map((l) => l.slice(0, 10))).toEqual(['{"level":3', '{"level":3', '{"level":3', 'after the ', '']);
        expect((JSON.parse(out[0]!) as { pad: string }).pad).toBe('x'.repeat(100_000));
        expect((JSON.parse(out[1]!) as { path: string }).path).toBe(`/${'y'.repeat(70_000)}`);
        expect(JSON.parse(out[2]!)).toMatchObject({ path: '/mcp', status: 200, msg: 'request' });
      },
    );
  });

  it('access lines in a burst, shared with other processes: whole lines within PIPE_BUF, every line once and in order', async () => {
    const count = 500;
    const run = await runToExit('burst', String(count), 'shared', 'access');
    expect(run.code).toBe(0);
    const access = run.stdout.split('\n').filter((l) => l.startsWith('{"level"'));
    expect(access.map((l) => (JSON.parse(l) as { durationMs: number }).durationMs)).toEqual(Array.from({ length: count }, (_, n) => n));
    const { writes, maxBytes, lineEnds } = report(run.stderr);
    expect(maxBytes).toBeLessThanOrEqual(ATOMIC_WRITE_BYTES);
    expect(lineEnds).toBe(true);
    expect(writes).toBeLessThan(count / 4);
  });

  it('access lines are the bytes pino writes for the same fields, in order with the other lines, all written before exit', async () => {
    // The child logs, for each case, a line, the access line and a start-up-style line, then exits
    // in the same turn. Here the same through pino (the access logger as it was: a child without
    // redaction), at the same pinned time.
    const expected: string[] = [];
    vi.spyOn(Date, 'now').mockReturnValue(PINNED_NOW);
    try {
      const logger = createLogger('info', { write: (line: string) => expected.push(line) }, 'json');
      const access = [logger, logger.child({ worker: 1 })].map((l) => l.child({}, { redact: { paths: [] } }));
      ACCESS_CASES.forEach((fields, n) => {
        logger.info({ n }, 'line');
        access[n % 2]!.info(fields, 'request');
        expected.push(`plain ${n}\n`);
      });
    } finally {
      vi.restoreAllMocks();
    }
    const [command, ...args] = nodeTs(CHILD, 'access');
    const { stdout } = await promisify(execFile)(command!, args, { encoding: 'buffer', env: process.env });
    expect(stdout.toString('latin1')).toBe(Buffer.from(expected.join('')).toString('latin1'));
    // The cases are what they claim: pino escaped some and left others as they are.
    const text = expected.join('');
    expect(text).toContain('"subject":"say \\"hi\\" \\\\ bye\\\\"');
    expect(text).toContain('"subject":"tab\\there\\nnew line\\u0001\\u001f"');
    expect(text).toContain('"subject":"José"');
    expect(text).toContain('"worker":1,"path":"/","msg":"request"}');
    expect(text).toContain('"status":null');
  });

  it('lines logged just before the process exits are all written', async () => {
    const count = 300;
    const run = await runToExit('exit', String(count));
    expect(run.code).toBe(0);
    expect(lines(run.stdout).map((l) => l.n)).toEqual(Array.from({ length: count }, (_, n) => n));
  });
});
