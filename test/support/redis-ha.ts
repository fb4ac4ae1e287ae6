// Real Redis high-availability topologies on loopback for the slow tests (test/slow/): a primary with
// one replica watched by three Sentinels, and a three-master Redis Cluster. Every process is a private
// redis-server on a free port in a temp dir (never the machine's Redis); readiness is the process's own
// log line plus a bounded poll on the real condition (replication link up, Sentinels seeing each other,
// cluster_state:ok), never a fixed sleep.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, redisServerBinary } from './redis-server.ts';

export interface RedisProcess {
  readonly port: number;
  readonly dir: string;
  readonly process: ChildProcess;
  /** Everything it logged so far. */
  output(): string;
  /** SIGKILL, as a crash would; resolves once the process is gone. */
  kill(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Spawns `redis-server args...` and resolves when its log shows `readyLine` (rejects if it exits first). */
function spawnRedis(args: string[], port: number, dir: string, readyLine: string, timeoutMs = 10_000): Promise<RedisProcess> {
  const binary = redisServerBinary();
  if (!binary) throw new Error('redis-server is not on PATH');
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server on ${port} not ready within ${timeoutMs} ms: ${log.slice(-400)}`));
    }, timeoutMs);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`redis-server on ${port} exited (${code}) before it was ready: ${log.slice(-400)}`));
    };
    const proc: RedisProcess = {
      port,
      dir,
      process: child,
      output: () => log,
      async kill() {
        child.kill('SIGKILL');
        await exited(child);
      },
    };
    child.stdout!.on('data', (chunk: Buffer) => {
      const had = log.includes(readyLine);
      log += chunk.toString();
      if (!had && log.includes(readyLine)) {
        clearTimeout(timer);
        child.off('exit', onExit);
        resolve(proc);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    child.once('exit', onExit);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

const COMMON = ['--bind', '127.0.0.1', '--protected-mode', 'no', '--logfile', '', '--save', '', '--appendonly', 'no'];

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws with `what`). */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 15_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A short-lived plain client for a one-off command; never retries, never queues. */
async function withClient<T>(port: number, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
    commandTimeout: 2000,
  });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

export function infoField(info: string, field: string): string | undefined {
  const m = new RegExp(`^${field}:(.*)$`, 'm').exec(info);
  return m?.[1]?.trim();
}

export async function info(port: number, section: string): Promise<string> {
  return withClient(port, (c) => c.info(section));
}

async function startDataNode(extra: string[]): Promise<RedisProcess> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-ha-'));
    try {
      // Diskless sync without its default 5 s delay: the replica is in sync a few ms after it starts.
      return await spawnRedis(
        ['--port', String(port), '--dir', dir, ...COMMON, '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0', ...extra],
        port,
        dir,
        'Ready to accept connections',
      );
    } catch (err) {
      lastError = err; // the port was taken in between: try another
      rmSync(dir, { recursive: true, force: true });
    }
  }
  throw lastError;
}

async function startSentinel(masterName: string, primaryPort: number, timing: SentinelTiming): Promise<RedisProcess> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-sentinel-'));
    // Sentinel rewrites its config file, so each one gets its own.
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        'protected-mode no',
        `dir ${dir}`,
        'logfile ""',
        `sentinel monitor ${masterName} 127.0.0.1 ${primaryPort} 2`,
        `sentinel down-after-milliseconds ${masterName} ${timing.downAfterMs}`,
        `sentinel failover-timeout ${masterName} ${timing.failoverTimeoutMs}`,
        `sentinel parallel-syncs ${masterName} 1`,
        '',
      ].join('\n'),
    );
    try {
      return await spawnRedis([conf, '--sentinel'], port, dir, `+monitor master ${masterName}`);
    } catch (err) {
      lastError = err;
      rmSync(dir, { recursive: true, force: true });
    }
  }
  throw lastError;
}

export interface SentinelTiming {
  downAfterMs: number;
  failoverTimeoutMs: number;
}

export interface SentinelSet {
  masterName: string;
  primary: RedisProcess;
  replica: RedisProcess;
  sentinels: RedisProcess[];
  /** `redis+sentinel://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/<masterName>` */
  url: string;
  /** The primary's port as the first answering Sentinel reports it. */
  currentPrimaryPort(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Primary + one replica + three Sentinels (quorum 2). Resolves once the replica's link is up and every
 * Sentinel knows the replica and the two other Sentinels, i.e. a failover can actually happen.
 */
export async function startSentinelSet(
  masterName = 'mcpauth',
  timing: SentinelTiming = { downAfterMs: 1000, failoverTimeoutMs: 3000 },
): Promise<SentinelSet> {
  const started: RedisProcess[] = [];
  try {
    const primary = await startDataNode([]);
    started.push(primary);
    const replica = await startDataNode(['--replicaof', '127.0.0.1', String(primary.port)]);
    started.push(replica);
    await until(
      'the replica to sync with the primary',
      async () => infoField(await info(replica.port, 'replication'), 'master_link_status') === 'up',
    );
    const sentinels: RedisProcess[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await startSentinel(masterName, primary.port, timing);
      started.push(s);
      sentinels.push(s);
    }
    // Sentinels find each other through hello messages on the primary (every 2 s) and the replica
    // through the primary's INFO: wait for both on every Sentinel, or a failover could not be voted.
    for (const s of sentinels) {
      await until(`Sentinel ${s.port} to see the replica and 2 other Sentinels`, () =>
        withClient(s.port, async (c) => {
          const master = toObject((await c.call('SENTINEL', 'MASTER', masterName)) as string[]);
          const replicas = ((await c.call('SENTINEL', 'REPLICAS', masterName)) as string[][]).map(toObject);
          return (
            master['num-other-sentinels'] === '2' && replicas.some((r) => r.port === String(replica.port) && !r.flags?.includes('down'))
          );
        }),
      );
    }
    const url = `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${masterName}`;
    return {
      masterName,
      primary,
      replica,
      sentinels,
      url,
      async currentPrimaryPort() {
        for (const s of sentinels) {
          try {
            const addr = await withClient(
              s.port,
              (c) => c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName) as Promise<[string, string]>,
            );
            return Number(addr[1]);
          } catch {
            // try the next one
          }
        }
        throw new Error('no Sentinel answered');
      },
      stop: () => stopAll(started),
    };
  } catch (err) {
    await stopAll(started);
    throw err;
  }
}

function toObject(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}

async function stopAll(processes: RedisProcess[]): Promise<void> {
  await Promise.all(
    processes.map(async (p) => {
      await p.kill();
      rmSync(p.dir, { recursive: true, force: true });
    }),
  );
}

export interface RedisClusterSet {
  nodes: RedisProcess[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3` */
  url: string;
  stop(): Promise<void>;
}

/** Three masters, no replicas, every slot assigned; resolves once every node reports cluster_state:ok. */
export async function startRedisCluster(): Promise<RedisClusterSet> {
  const nodes: RedisProcess[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await startDataNode(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']),
      );
    }
    const created = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed (${created.status}): ${created.stdout}${created.stderr}`);
    for (const n of nodes) {
      await until(`node ${n.port} to report cluster_state:ok`, async () => {
        const text = await withClient(n.port, (c) => c.call('CLUSTER', 'INFO') as Promise<string>);
        return infoField(text, 'cluster_state') === 'ok' && infoField(text, 'cluster_known_nodes') === '3';
      });
    }
    return { nodes, url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`, stop: () => stopAll(nodes) };
  } catch (err) {
    await stopAll(nodes);
    throw err;
  }
}
