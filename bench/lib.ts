// Helpers of the bench: forked children with their stats over IPC, CPU time of any process from /proc,
// percentiles, formatting.

import { execSync, fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { ChildMessage, ChildRequest, ProcessStats } from './child-ipc.ts';

const TSX = import.meta.resolve('tsx');
/**
 * How a child runs its TypeScript: as production does (`node bin/mcp-bearer-proxy.js`), with Node's own
 * type stripping, where this Node has it (22.18 and later); through tsx below that, or when the child's
 * environment sets BENCH_TSX=1 (tsx wraps every named function in a `__name` helper, about 1% of the
 * sidecar's profile, which production never runs).
 */
function loaderArgs(env: Record<string, string> | undefined): string[] {
  const stripping = Boolean((process.features as { typescript?: unknown }).typescript);
  return stripping && env?.BENCH_TSX !== '1' ? [] : ['--import', TSX];
}

export class Child {
  readonly #process: ChildProcess;
  #nextId = 0;
  readonly #waiting = new Map<number, (stats: ProcessStats) => void>();

  readonly name: string;
  readonly urls: Record<string, string>;

  private constructor(name: string, child: ChildProcess, urls: Record<string, string>) {
    this.name = name;
    this.urls = urls;
    this.#process = child;
    child.on('message', (message: ChildMessage) => {
      if (message.type !== 'stats') return;
      const wake = this.#waiting.get(message.id);
      this.#waiting.delete(message.id);
      wake?.(message);
    });
  }

  get pid(): number | undefined {
    return this.#process.pid;
  }

  /** Forks `file` (loaderArgs) and resolves once it reported `ready` (rejects if it exits first). */
  static async start(
    name: string,
    file: string,
    options: { env?: Record<string, string>; execArgv?: string[]; stdout?: number | 'ignore' | 'inherit' } = {},
  ): Promise<Child> {
    const child = fork(file, [], {
      execArgv: [...loaderArgs(options.env), '--expose-gc', ...(options.execArgv ?? [])],
      env: { ...process.env, ...options.env },
      stdio: ['ignore', options.stdout ?? 'ignore', 'inherit', 'ipc'],
    });
    const urls = await new Promise<Record<string, string>>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`${name} exited (${code}) before it was ready`));
      child.once('exit', onExit);
      child.once('error', reject);
      child.on('message', function onReady(message: ChildMessage) {
        if (message.type !== 'ready') return;
        child.off('message', onReady);
        child.off('exit', onExit);
        resolve(message.urls);
      });
    });
    return new Child(name, child, urls);
  }

  /** Memory and CPU counters; `gc` collects first; `heapSnapshot` also writes one to that file. */
  stats(gc = false, heapSnapshot?: string): Promise<ProcessStats> {
    const id = ++this.#nextId;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      this.#process.send({ type: 'stats', id, gc, ...(heapSnapshot ? { heapSnapshot } : {}) } satisfies ChildRequest);
    });
  }

  /** Asks for a clean exit (a CPU profile is written then); kills it if it is not gone in 5 s. */
  async stop(): Promise<void> {
    const child = this.#process;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.connected) child.send({ type: 'stop' } satisfies ChildRequest);
    else child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/** Percentile of an ascending-sorted array (nearest rank). */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil(q * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

export function sortedCopy(values: readonly number[]): Float64Array {
  return Float64Array.from(values).sort();
}

export const fmt = {
  ms: (v: number) => (Number.isFinite(v) ? v.toFixed(v < 10 ? 3 : 1) : '—'),
  int: (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '—'),
  ratio: (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '—'),
  mib: (bytes: number) => (Number.isFinite(bytes) ? (bytes / 1048576).toFixed(1) : '—'),
  kib: (bytes: number) => (Number.isFinite(bytes) ? (bytes / 1024).toFixed(1) : '—'),
  signedMs: (v: number) => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(3)}` : '—'),
};

export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

const CLOCK_TICKS = (() => {
  try {
    return Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system, or system alone, µs) of a `/proc/<pid>/stat` line's fields after the command name. */
export function statCpuMicros(afterCommand: string, which: 'all' | 'system' = 'all'): number {
  // utime and stime are the 12th and 13th fields after "pid (comm) ", in clock ticks.
  const fields = afterCommand.split(' ');
  const ticks = (which === 'all' ? Number(fields[11]) : 0) + Number(fields[12]);
  return (ticks * 1e6) / CLOCK_TICKS;
}

/**
 * User + system CPU time of these processes together (or the system, kernel, time alone), µs, from
 * /proc (Linux); NaN if one is gone or elsewhere.
 */
export function procCpuMicros(pids: readonly number[], which: 'all' | 'system' = 'all'): number {
  let total = 0;
  for (const pid of pids) {
    try {
      total += statCpuMicros(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!, which);
    } catch {
      return Number.NaN;
    }
  }
  return total;
}

/** Read and write system calls the processes made so far (/proc/<pid>/io: syscr + syscw, every thread). */
export function procSyscalls(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      const io = readFileSync(`/proc/${pid}/io`, 'utf8');
      for (const m of io.matchAll(/^sysc[rw]:\s+(\d+)$/gm)) total += Number(m[1]);
    } catch {
      return Number.NaN;
    }
  }
  return total;
}

/**
 * Context switches (voluntary and involuntary) of every thread of these processes together, from
 * /proc (Linux); NaN if one is gone. A thread handing work to another and waiting for it (libuv's pool)
 * shows here before it shows in CPU time.
 */
export function procContextSwitches(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      return Number.NaN;
    }
    for (const task of tasks) {
      let status: string;
      try {
        status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
      } catch {
        continue; // a thread that ended since the listing
      }
      for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) total += Number(m[1]);
    }
  }
  return total;
}

/** Installs a Debian package with apt-get (apt-get update first), as root only; says so on stderr. */
export function aptInstall(pkg: string, why: string): boolean {
  if (process.getuid?.() !== 0) {
    process.stderr.write(`[bench] ${why}, and this is not root: apt-get install ${pkg}\n`);
    return false;
  }
  process.stderr.write(`[bench] ${why}: installing ${pkg} with apt-get (apt-get update first)\n`);
  try {
    execSync(`apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${pkg}`, {
      stdio: ['ignore', 'ignore', 'inherit'],
      timeout: 240_000,
    });
    return true;
  } catch (err) {
    process.stderr.write(`[bench] apt-get install ${pkg} failed: ${(err as Error).message.split('\n')[0]}\n`);
    return false;
  }
}
