// A real sidecar (or demo) process for end-to-end tests: spawned in the repository root, its stdout and
// stderr collected, readiness and later events awaited on its output (never on a timer).

import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { expect } from 'vitest';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { generateToken } from '../../src/model/credentials.ts';
import { deleteUnder, rawRedis, redisUrl, uniquePrefix } from './redis.ts';
import { readSse, type SseEvent } from './sse.ts';

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

/** A sidecar process on the suite's Redis, under a key prefix and a temporary config of its own. */
export interface SidecarProcess extends Started {
  proxyUrl: string;
  adminUrl: string;
  /** The master token it was started with. */
  master: string;
  /** Its Redis key prefix. */
  prefix: string;
  /** Calls an admin operation (`POST /oauth/<op>`) with the master token. */
  admin(op: string, body: Record<string, unknown>): Promise<{ status: number; body: Record<string, string> }>;
  /** Kills it if it still runs, deletes the keys under its prefix and its temporary directory. */
  cleanup(): Promise<void>;
}

/**
 * Starts `argv` with a config file of its own (the key prefix, a 10 s shutdown grace and
 * `configLines`), the master token and REDIS_URL in the environment on top of `env`, and waits until it
 * prints both listeners. `replicaOf`: another sidecar's key prefix and master token (one more replica).
 */
export async function startSidecarProcess(
  label: string,
  argv: string[],
  env: NodeJS.ProcessEnv,
  configLines: string[] = [],
  replicaOf?: SidecarProcess,
): Promise<SidecarProcess> {
  const dir = mkdtempSync(join(tmpdir(), `mcp-bearer-proxy-${label}-`));
  const prefix = replicaOf?.prefix ?? uniquePrefix(label);
  const master = replicaOf?.master ?? generateToken();
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, [...configLines, 'redis:', `  keyPrefix: "${prefix}"`, 'proxy:', '  shutdownGraceMs: 10000', ''].join('\n'));
  const started = await startProcess(argv, { ...env, MCP_AUTH_CONFIG: configPath, BEARER_SECRET_MASTER: master, REDIS_URL: redisUrl() }, [
    /proxy listening on (\S+)/,
    /admin listening on (\S+)/,
  ]).catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  const adminUrl = /admin listening on (\S+)/.exec(started.output())![1]!;
  return {
    ...started,
    proxyUrl: /proxy listening on (\S+)/.exec(started.output())![1]!,
    adminUrl,
    master,
    prefix,
    async admin(op, body) {
      const res = await fetch(`${adminUrl}/oauth/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${master}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, string> };
    },
    async cleanup() {
      if (started.child.exitCode === null) started.child.kill('SIGKILL');
      const raw = await rawRedis();
      try {
        await deleteUnder(raw, prefix);
      } finally {
        await raw.quit();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Starts the reference upstream's `progress` tool (4 steps, 150 ms apart) through `mcpUrl` in the
 * session, sends `target` SIGTERM once the call is provably in flight (its first progress event has
 * come through), and reads the stream to the call's result: every event, in order.
 */
export async function sigtermDuringCall(target: Started, mcpUrl: string, headers: Headers): Promise<SseEvent[]> {
  const call = await fetch(mcpUrl, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'progress', arguments: { steps: 4, delayMs: 150 }, _meta: { progressToken: 'drain' } },
    }),
  });
  expect(call.status).toBe(200);
  let signalled = false;
  const all = await readSse(call.body!, (seen) => {
    if (seen.length >= 1 && !signalled) signalled = target.child.kill('SIGTERM');
    return seen.some((e) => 'result' in JSON.parse(e.data));
  });
  expect(signalled).toBe(true);
  expect(JSON.parse(all.at(-1)!.data).result.content[0].text).toBe('done 4');
  return all;
}
