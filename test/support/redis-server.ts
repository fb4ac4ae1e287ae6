// Starts a private redis-server on a free loopback port in a temp dir, and waits for its own
// "Ready to accept connections" line (no sleeping). Used by the global setup and by tests that must
// kill and restart Redis. Never touches the machine's shared Redis.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly process: ChildProcess;
  /** SIGKILL, as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port and dir (after kill). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export function redisServerBinary(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  const path = found.stdout.trim();
  return found.status === 0 && path ? path : null;
}

import { freePort } from './ports.ts';

export { freePort };

function launch(binary: string, port: number, dir: string, extraArgs: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      binary,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--protected-mode',
        'no',
        '--logfile',
        '',
        ...extraArgs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it was ready: ${output.slice(-400)}`)));
    child.once('error', reject);
  });
}

export async function startRedisServer(extraArgs: string[] = []): Promise<RedisServer> {
  const binary = redisServerBinary();
  if (!binary) throw new Error('redis-server is not on PATH');
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-redis-'));
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    try {
      let child = await launch(binary, port, dir, extraArgs);
      const exited = (c: ChildProcess) =>
        c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => c.once('exit', () => r()));
      const server: RedisServer = {
        url: `redis://127.0.0.1:${port}`,
        port,
        get process() {
          return child;
        },
        async kill() {
          child.kill('SIGKILL');
          await exited(child);
        },
        async restart() {
          child = await launch(binary, port, dir, extraArgs);
        },
        async stop() {
          child.kill('SIGTERM');
          await exited(child);
          rmSync(dir, { recursive: true, force: true });
        },
      };
      return server;
    } catch (err) {
      lastError = err; // the free port was taken in between: try another
    }
  }
  throw lastError;
}
