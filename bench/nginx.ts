// nginx for the bench: installs Debian's nginx-light when it is missing (apt-get, as root), writes a
// config into a temp dir and runs it in the foreground. Two listeners on loopback: the `auth_request`
// listener of examples/nginx/mcp.conf (every request checked by a subrequest to the auth service
// first), and a plain `proxy_pass`. The same configuration asks either the peer's 20-line auth service
// (`/check`) or the sidecar's forward-auth endpoint (`/authz`): only the address and path of the auth
// subrequest differ.

import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { NGINX_EXAMPLE, nginxSite } from '../test/support/ingress.ts';
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
  // The auth_request listener is examples/nginx/mcp.conf, as a platform team deploys it (its access
  // log in the example's format, the identity headers copied with auth_request_set, keep-alive and
  // request caps as the example leaves them), with only its addresses replaced; the peer's service is
  // asked at its own path in place of the sidecar's /authz. Beside it a plain `proxy_pass` listener,
  // tuned as the pass-through row wants it: keep-alive, no per-connection request cap, no buffering.
  const site = nginxSite(readFileSync(NGINX_EXAMPLE, 'utf8'), { sidecar: auth.host, upstream: upstream.host, port: authPort, dir }).replace(
    'proxy_pass http://mcp_sidecar/authz;',
    `proxy_pass http://mcp_sidecar${options.authPath ?? '/check'};`,
  );
  writeFileSync(join(dir, 'mcp.conf'), site);
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
  include ${dir}/mcp.conf;
  upstream app { server ${upstream.host}; keepalive 512; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:${passPort};
    keepalive_requests 1000000;
    proxy_http_version 1.1;
    proxy_buffering off;
    proxy_request_buffering off;
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
