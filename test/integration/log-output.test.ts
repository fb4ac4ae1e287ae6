// The sidecar's stdout log output as a log shipper reads it: real processes writing through the real
// destination (pino over sonic-boom on fd 1) into a pipe, as under a container runtime.
// - Lines go out in batches, not one write() per line: each asynchronous write is a round trip through
//   libuv's thread pool, and one per access line cost a busy proxy more than one context switch per request.
// - A batch is never held back by quiet: a lone line is written within the flush interval.
// - Whole lines only, and within PIPE_BUF when other processes share the pipe (worker processes).
// - Nothing is lost when the process exits right after logging.
// - The start-up lines (`proxy listening on ...`) keep their place after the log lines before them.

import { describe, expect, it } from 'vitest';
import { ATOMIC_WRITE_BYTES } from '../../src/observability/logger.ts';
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

  it('lines logged just before the process exits are all written', async () => {
    const count = 300;
    const run = await runToExit('exit', String(count));
    expect(run.code).toBe(0);
    expect(lines(run.stdout).map((l) => l.n)).toEqual(Array.from({ length: count }, (_, n) => n));
  });
});
