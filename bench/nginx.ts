// nginx for the bench: installs Debian's nginx-light when it is missing (apt-get, as root), writes a
// config into a temp dir and runs it in the foreground. Two listeners on loopback: the `auth_request`
// peer (every request checked by a subrequest to the auth service first) and a plain `proxy_pass`.
// The same configuration asks either the 20-line auth service (`/check`) or the sidecar's forward-auth
// endpoint (`/authz`): only the address and path of the auth subrequest differ.

import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { aptInstall } from './lib.ts';

function hasNginxWithAuthRequest(): boolean {
  try {
    return execSync('nginx -V 2>&1', { encoding: 'utf8' }).includes('--with-http_auth_request_module');
  } catch {
    return false;
  }
}

/** True when nginx with the auth_request module is (now) there; installs nginx-light if it can. */
export function ensureNginx(): boolean {
  if (hasNginxWithAuthRequest()) return true;
  if (!aptInstall('nginx-light', 'nginx (with auth_request) is missing')) {
    process.stderr.write('[bench] the nginx rows are skipped\n');
    return false;
  }
  return hasNginxWithAuthRequest();
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Nginx {
  authRequestUrl: string;
  proxyPassUrl: string;
  pid: number;
  /** nginx's worker processes (for their CPU counters). */
  workerPids(): number[];
  stop(): Promise<void>;
}

export async function startNginx(options: {
  dir: string;
  upstreamUrl: string;
  authUrl: string;
  authPath?: string;
  workers: number;
}): Promise<Nginx> {
  const dir = join(options.dir, 'nginx');
  mkdirSync(dir, { recursive: true });
  const [authPort, passPort] = [await freePort(), await freePort()];
  const upstream = new URL(options.upstreamUrl);
  const auth = new URL(options.authUrl);
  // Tuned as a platform team would: keep-alive to both backends, no per-connection request cap
  // (nginx closes client and upstream connections after 1,000 requests by default), no buffering
  // (SSE must flow), the access log on (the sidecar writes one too).
  const conf = `
worker_processes ${options.workers};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
${process.getuid?.() === 0 ? 'user root;' : ''}
events { worker_connections 8192; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream app { server ${upstream.host}; keepalive 512; keepalive_requests 1000000; }
  upstream auth { server ${auth.host}; keepalive 512; keepalive_requests 1000000; }
  proxy_http_version 1.1;
  proxy_buffering off;
  proxy_request_buffering off;
  server {
    listen 127.0.0.1:${authPort};
    location = /mcp {
      auth_request /_auth;
      auth_request_set $auth_kind $upstream_http_x_mcp_auth_kind;
      auth_request_set $auth_subject $upstream_http_x_mcp_auth_subject;
      proxy_set_header Connection "";
      proxy_set_header Authorization "";
      proxy_set_header X-MCP-Auth-Kind $auth_kind;
      proxy_set_header X-MCP-Auth-Subject $auth_subject;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_pass http://app${upstream.pathname};
    }
    location = /_auth {
      internal;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header Connection "";
      # What the sidecar's /authz needs (the auth service ignores them): the original request, and the
      # Host the client asked for (nginx would send the upstream block's name).
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header Host $host;
      proxy_pass http://auth${options.authPath ?? '/check'};
    }
  }
  server {
    listen 127.0.0.1:${passPort};
    location / {
      proxy_set_header Connection "";
      proxy_pass http://app;
    }
  }
}
`;
  const confFile = join(dir, 'nginx.conf');
  writeFileSync(confFile, conf);
  const child: ChildProcess = spawn('nginx', ['-p', dir, '-e', join(dir, 'error.log'), '-c', confFile], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = once(child, 'exit');
  const authRequestUrl = `http://127.0.0.1:${authPort}/mcp`;
  // Ready when it answers on both ports (nginx has no readiness signal in the foreground).
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}); see its error log`);
    const up = await Promise.all(
      [authRequestUrl, `http://127.0.0.1:${passPort}/`].map((u) =>
        fetch(u, { method: 'HEAD' }).then(
          (r) => r.status > 0,
          () => false,
        ),
      ),
    );
    if (up.every(Boolean)) break;
    if (Date.now() > deadline) throw new Error('nginx did not come up in 10 s');
    await sleep(50);
  }
  const pid = child.pid!;
  return {
    authRequestUrl,
    proxyPassUrl: `http://127.0.0.1:${passPort}${upstream.pathname}`,
    pid,
    workerPids: () => childPids(pid),
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGQUIT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export function childPids(pid: number): number[] {
  try {
    return execSync(`cat /proc/${pid}/task/*/children`, { encoding: 'utf8' }).split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
