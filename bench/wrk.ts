// wrk as the load generator of the fast-upstream scenario: C, one thread, far cheaper per request than
// any Node client, so that on two shared cores the generator is not what limits the proxy. Installs
// Debian's wrk when it is missing. Each run reports its own CPU time (read from /proc in its `done`
// hook) so the report can show that the generator had headroom.

import { execFile, execSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { aptInstall, statCpuMicros } from './lib.ts';

export function ensureWrk(): boolean {
  const has = () => {
    try {
      execSync('command -v wrk', { stdio: 'ignore', shell: '/bin/sh' });
      return true;
    } catch {
      return false;
    }
  };
  if (has()) return true;
  if (!aptInstall('wrk', 'wrk is missing')) return false;
  return has();
}

export interface WrkResult {
  requests: number;
  seconds: number;
  /** Responses outside 2xx/3xx. */
  badStatus: number;
  /** Connect, read, write errors and timeouts. */
  socketErrors: number;
  /** Latency percentiles in ms. */
  p50: number;
  p99: number;
  p999: number;
  /** wrk's own user + system CPU time, µs. */
  cpuMicros: number;
}

export function writeWrkScript(
  dir: string,
  name: string,
  request: { method: string; headers: Record<string, string>; body?: string },
): string {
  const lua = [
    `wrk.method = ${JSON.stringify(request.method)}`,
    ...(request.body !== undefined ? [`wrk.body = ${luaString(request.body)}`] : []),
    ...Object.entries(request.headers).map(([k, v]) => `wrk.headers[${luaString(k)}] = ${luaString(v)}`),
    'done = function(summary, latency, requests)',
    '  local f = io.open("/proc/self/stat", "r"); local stat = f:read("*a"); f:close()',
    '  local e = summary.errors',
    '  io.write(string.format("BENCH %d %d %d %d %d %d %d ", summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))',
    '  io.write(stat)',
    'end',
  ].join('\n');
  const file = join(dir, `${name}.lua`);
  writeFileSync(file, `${lua}\n`);
  return file;
}

function luaString(s: string): string {
  return `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export function runWrk(url: string, script: string, connections: number, seconds: number): Promise<WrkResult> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', script, url];
  return new Promise((resolve, reject) => {
    execFile('wrk', args, { encoding: 'utf8', timeout: (seconds + 30) * 1000 }, (err, stdout) => {
      if (err) return reject(new Error(`wrk failed: ${err.message}`));
      const line = stdout.split('\n').find((l) => l.startsWith('BENCH '));
      if (!line) return reject(new Error(`wrk printed no summary: ${stdout}`));
      const parts = line.split(' ');
      const [requests, durationUs, status, socket, p50, p99, p999] = parts.slice(1, 8).map(Number) as [
        number,
        number,
        number,
        number,
        number,
        number,
        number,
      ];
      const cpuMicros = statCpuMicros(line.slice(line.indexOf(') ') + 2));
      resolve({
        requests,
        seconds: durationUs / 1e6,
        badStatus: status,
        socketErrors: socket,
        p50: p50 / 1000,
        p99: p99 / 1000,
        p999: p999 / 1000,
        cpuMicros,
      });
    });
  });
}

/** Longest warm-up of one target (warmUp below); BENCH_WARMUP_MAX_SECONDS overrides it. */
export const WARM_UP_MAX_SECONDS = Number(process.env.BENCH_WARMUP_MAX_SECONDS ?? 30);

/**
 * Loads a target at 32 connections, in cells of 2 s, until two cells in a row agree within 6% (at
 * least 10 s, at most WARM_UP_MAX_SECONDS): until V8 has compiled its hot path. A process with more
 * code on it warms up longer: on two shared cores the sidecar's `/mcp` rate rose for 15-20 s of load
 * (from 1,800 to 3,500 req/s at 32 connections, and from 850 to 1,500 at one), a pass-through's and
 * nginx's within a few seconds. A target measured after a fixed second of warm-up is measured cold.
 * Returns the seconds spent and the last cell's rate.
 */
export async function warmUp(url: string, script: string): Promise<{ seconds: number; rps: number; settled: boolean }> {
  const CELL = 2;
  let previous: number | undefined;
  let seconds = 0;
  let cells = 0;
  while (true) {
    const r = await runWrk(url, script, 32, CELL);
    const rps = r.requests / r.seconds;
    seconds += CELL;
    cells++;
    const settled = cells >= 5 && previous !== undefined && Math.abs(rps - previous) <= 0.06 * Math.max(rps, previous);
    if (settled || seconds + CELL > WARM_UP_MAX_SECONDS) return { seconds, rps, settled };
    previous = rps;
  }
}
