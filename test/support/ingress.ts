// Real ingresses for the forward-auth tests: nginx and Caddy (Debian's nginx-light and caddy) run from
// the configurations in examples/, with only their addresses replaced, each in its own temp prefix, on
// a port the OS picked. Ready when their port accepts a connection, within a bounded wait.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type IngressKind = 'nginx' | 'caddy';

/** How long an ingress may take to accept connections (a loaded machine starting a Go binary). */
const START_TIMEOUT_MS = 20_000;

const BINARIES: Record<IngressKind, string> = { nginx: '/usr/sbin/nginx', caddy: 'caddy' };

/**
 * Whether the ingress can run here; the tests that need it are skipped when it cannot. With
 * REQUIRE_INGRESS set (.ci/run sets it, after installing both) a missing one is an error instead: a
 * skip there would hide a broken install.
 */
export function ingressAvailable(kind: IngressKind): boolean {
  const found = spawnSync(BINARIES[kind], [kind === 'nginx' ? '-v' : 'version'], { stdio: 'ignore' }).status === 0;
  if (!found && process.env.REQUIRE_INGRESS) throw new Error(`${kind} is not installed (.ci/run installs nginx-light and caddy)`);
  return found;
}

export interface Ingress {
  /** http://127.0.0.1:PORT */
  url: string;
  port: number;
  /** What the ingress wrote to stderr / its error log so far (for a failing test's message). */
  log(): string;
  /** nginx: the example's access log of forwarded MCP requests (its `mcp_auth` format); Caddy: empty. */
  accessLog(): string;
  stop(): Promise<void>;
}

import { freePort } from './ports.ts';

export { freePort };

/** examples/nginx/mcp.conf: what a platform team deploys, run as is by the tests and the bench. */
export const NGINX_EXAMPLE = new URL('../../examples/nginx/mcp.conf', import.meta.url);

/**
 * The nginx example with only its addresses replaced: the sidecar and the MCP server at `host:port`,
 * the listener on loopback at `port`, its logs under `dir`.
 */
export function nginxSite(text: string, at: { sidecar: string; upstream: string; port: number; dir: string }): string {
  return text
    .replace('server 127.0.0.1:8080;', `server ${at.sidecar};`)
    .replace('server 127.0.0.1:3000;', `server ${at.upstream};`)
    .replace('listen 80;', `listen 127.0.0.1:${at.port};`)
    .replaceAll('/var/log/nginx/', `${at.dir}/`);
}

/**
 * Starts `kind` from its example configuration on `port`, with the sidecar and the MCP server at the
 * given origins (`http://127.0.0.1:PORT`) in place of the example's.
 */
export async function startIngress(
  kind: IngressKind,
  options: {
    port: number;
    sidecar: string;
    upstream: string;
    /** Edits the example's text first (a variant its comments describe). */
    edit?: (text: string) => string;
  },
): Promise<Ingress> {
  const edit = options.edit ?? ((text: string) => text);
  const dir = mkdtempSync(join(tmpdir(), `mcp-${kind}-`));
  const sidecar = new URL(options.sidecar).host;
  const upstream = new URL(options.upstream).host;
  let child: ChildProcess;
  let stderr = '';
  if (kind === 'nginx') {
    const site = nginxSite(edit(readFileSync(NGINX_EXAMPLE, 'utf8')), { sidecar, upstream, port: options.port, dir });
    writeFileSync(join(dir, 'mcp.conf'), site);
    const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t};`).join('\n');
    writeFileSync(
      join(dir, 'nginx.conf'),
      `daemon off;\nworker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log info;\n${process.getuid?.() === 0 ? 'user root;\n' : ''}events { worker_connections 256; }\nhttp {\n  access_log ${dir}/access.log;\n${temp}\n  include ${dir}/mcp.conf;\n}\n`,
    );
    child = spawn(BINARIES.nginx, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } else {
    const site = edit(readFileSync(new URL('../../examples/caddy/Caddyfile', import.meta.url), 'utf8'))
      .replaceAll('127.0.0.1:8080', sidecar)
      .replaceAll('127.0.0.1:3000', upstream)
      .replace(':80 {', `http://127.0.0.1:${options.port} {`);
    writeFileSync(join(dir, 'Caddyfile'), site);
    child = spawn(BINARIES.caddy, ['run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      // Caddy keeps its state (certificates, autosave) under XDG dirs: this run's own.
      env: { ...process.env, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config'), HOME: dir },
    });
  }
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = once(child, 'exit');
  const log = () => {
    let errorLog = '';
    try {
      errorLog = readFileSync(join(dir, 'error.log'), 'utf8');
    } catch {
      // Caddy writes to stderr only.
    }
    return `${stderr}${errorLog}`;
  };
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await acceptsConnections(options.port, child, START_TIMEOUT_MS);
  } catch (err) {
    const text = log();
    await stop();
    throw new Error(`${kind} did not start: ${(err as Error).message}\n${text}`);
  }
  const accessLog = () => {
    try {
      return readFileSync(join(dir, 'mcp-access.log'), 'utf8');
    } catch {
      return '';
    }
  };
  return { url: `http://127.0.0.1:${options.port}`, port: options.port, log, accessLog, stop };
}

/** Resolves once `port` accepts a TCP connection; rejects when the process exits or `timeoutMs` passes. */
async function acceptsConnections(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} refused connections for ${timeoutMs} ms`);
    // A refused connect returns at once: wait for the process to make progress rather than spin.
    await Promise.race([new Promise((resolve) => setTimeout(resolve, 20)), once(child, 'exit')]);
  }
}
