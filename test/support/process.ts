// A real sidecar (or demo) process for end-to-end tests: spawned in the repository root, its stdout and
// stderr collected, readiness and later events awaited on its output (never on a timer).

import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import type { Readable } from 'node:stream';

export type Child = ChildProcessByStdio<null, Readable, Readable>;

export interface Started {
  child: Child;
  /** Everything the process wrote to stdout and stderr so far. */
  output: () => string;
  exit: Promise<number | null>;
  /** Resolves once the output satisfies `test` (checked on every chunk); rejects if the process exits first. */
  waitFor: (test: (output: string) => boolean) => Promise<void>;
}

/** Spawns a command in the repository root (not waiting for anything). */
export function spawnProcess(argv: string[], env: NodeJS.ProcessEnv): Started {
  const child = spawn(argv[0]!, argv.slice(1), { cwd: process.cwd(), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const waiters = new Set<() => void>();
  const onData = (d: string) => {
    out += d;
    for (const check of waiters) check();
  };
  child.stdout.setEncoding('utf8').on('data', onData);
  child.stderr.setEncoding('utf8').on('data', onData);
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  const waitFor = (test: (output: string) => boolean) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!test(out)) return;
        waiters.delete(check);
        resolve();
      };
      waiters.add(check);
      check();
      void exit.then((code) => {
        if (!waiters.has(check)) return;
        waiters.delete(check);
        reject(new Error(`process exited (${code}) before the awaited output:\n${out}`));
      });
    });
  return { child, output: () => out, exit, waitFor };
}

/** Spawns a command in the repository root and waits until its output matches every pattern. */
export async function startProcess(argv: string[], env: NodeJS.ProcessEnv, ready: RegExp[]): Promise<Started> {
  const started = spawnProcess(argv, env);
  await started.waitFor((out) => ready.every((r) => r.test(out)));
  return started;
}
