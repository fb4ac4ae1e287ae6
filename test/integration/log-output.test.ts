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
import { spawnProcess, type Started } from '../support/process.ts';

const CHILD = 'test/support/log-child.ts';

interface Report {
  writes: number;
  maxBytes: number;
  lineEnds: boolean;
}

/** One of the child's streams alone (the process helper's output interleaves both). */
function streamOf(started: Started, name: 'stdout' | 'stderr'): () => string {
  let out = '';
  started.child[name].on('data', (chunk: string) => (out += chunk));
  return () => out;
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
    const started = spawnProcess(nodeTs(CHILD, 'lone'), process.env);
    const stdout = streamOf(started, 'stdout');
    try {
      await started.waitFor((out) => out.includes('"msg":"lone line"'));
      expect(started.child.exitCode).toBeNull();
      expect(lines(stdout())).toEqual([expect.objectContaining({ msg: 'lone line', n: 0 })]);
    } finally {
      started.child.kill('SIGKILL');
      await started.exit;
    }
  });

  it('lines logged one a turn go out in a few writes of whole lines, every line once and in order', async () => {
    const count = 2000;
    const started = spawnProcess(nodeTs(CHILD, 'burst', String(count)), process.env);
    const stdout = streamOf(started, 'stdout');
    const stderr = streamOf(started, 'stderr');
    expect(await started.exit).toBe(0);
    const out = lines(stdout());
    expect(out.map((l) => l.n)).toEqual(Array.from({ length: count }, (_, n) => n));
    const { writes, lineEnds } = report(stderr());
    // About 280 bytes a line, written 8 KiB or more at a time: about 70 writes, not 2,000.
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThan(count / 10);
    expect(lineEnds).toBe(true);
  });

  it('shared with other processes, every write is whole lines within PIPE_BUF', async () => {
    const count = 500;
    const started = spawnProcess(nodeTs(CHILD, 'burst', String(count), 'shared'), process.env);
    const stdout = streamOf(started, 'stdout');
    const stderr = streamOf(started, 'stderr');
    expect(await started.exit).toBe(0);
    expect(lines(stdout())).toHaveLength(count);
    const { writes, maxBytes, lineEnds } = report(stderr());
    expect(maxBytes).toBeLessThanOrEqual(ATOMIC_WRITE_BYTES);
    expect(lineEnds).toBe(true);
    expect(writes).toBeLessThan(count / 4);
  });

  it('the start-up lines written after a log line come after it on stdout', async () => {
    const started = spawnProcess(nodeTs(CHILD, 'listening'), process.env);
    const stdout = streamOf(started, 'stdout');
    try {
      await started.waitFor((out) => out.includes('admin listening on'));
      const out = stdout().split('\n');
      const warning = out.findIndex((l) => l.includes('"msg":"a start-up warning"'));
      expect(warning).toBeGreaterThanOrEqual(0);
      expect(warning).toBeLessThan(out.findIndex((l) => l.startsWith('proxy listening on')));
    } finally {
      started.child.kill('SIGKILL');
      await started.exit;
    }
  });

  it('lines logged just before the process exits are all written', async () => {
    const count = 300;
    const started = spawnProcess(nodeTs(CHILD, 'exit', String(count)), process.env);
    const stdout = streamOf(started, 'stdout');
    expect(await started.exit).toBe(0);
    expect(lines(stdout()).map((l) => l.n)).toEqual(Array.from({ length: count }, (_, n) => n));
  });
});
