// The auth service of the nginx `auth_request` peer: what a platform team would write in an afternoon
// beside nginx. It does exactly the credential model's check on the same Redis and the same keys as the
// sidecar: SHA-256 of the bearer token, one pipelined read of the user-grade record and the OAuth
// access-token record, then revoked / revokedAt / expiresAt; 204 with the identity for nginx to pass
// on, 401 otherwise. No logging, no metrics: the lean peer.
// BENCH_AUTH_PROCESSES > 1: this process forks that many workers sharing the port (node:cluster), the
// peer of the sidecar with workers; it only reports the port and stops them.
// BENCH_AUTH_NO_CHECK=1: the floor instead: 204 with the same identity headers at once, no Redis and
// no check, what the cheapest Node auth service behind auth_request could cost.

import cluster from 'node:cluster';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { keyLayout } from '../src/store/records.ts';
import { serveChild } from './child-ipc.ts';

const processes = Number(process.env.BENCH_AUTH_PROCESSES ?? 1);
if (processes > 1 && cluster.isPrimary) {
  const ports: number[] = [];
  const listening = new Promise<number>((resolve) => {
    cluster.on('listening', (_worker, address) => {
      ports.push(address.port);
      if (ports.length === processes) resolve(address.port);
    });
  });
  for (let i = 0; i < processes; i++) cluster.fork();
  const port = await listening;
  serveChild({ url: `http://127.0.0.1:${port}` }, async () => {
    const exits = Object.values(cluster.workers ?? {}).map(
      (w) => new Promise((resolve) => (w!.process.kill('SIGTERM'), w!.process.once('exit', resolve))),
    );
    await Promise.all(exits);
  });
} else if (process.env.BENCH_AUTH_NO_CHECK === '1') await serveNoCheck();
else await serveAuth();

async function serveNoCheck(): Promise<void> {
  const server = createServer((_req, res) => {
    res.writeHead(204, { 'x-mcp-auth-kind': 'oauth', 'x-mcp-auth-subject': 'floor' }).end();
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  serveChild({ url: `http://127.0.0.1:${port}` }, async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
}

async function serveAuth(): Promise<void> {
  const redis = new Redis(process.env.BENCH_REDIS_URL!, { enableAutoPipelining: true, lazyConnect: true });
  await redis.connect();
  const keys = keyLayout(process.env.BENCH_KEY_PREFIX ?? 'mcpauth:');
  const BEARER = /^Bearer ([0-9a-f]{64})$/i;
  const EPOCH_MS = /^[0-9]{1,16}$/;

  function valid(expiresAt: string | undefined, now: number): boolean {
    return expiresAt !== undefined && EPOCH_MS.test(expiresAt) && now < Number(expiresAt);
  }

  const server = createServer((req, res) => {
    const match = BEARER.exec(req.headers.authorization ?? '');
    if (!match) {
      res.writeHead(401).end();
      return;
    }
    const hash = createHash('sha256').update(match[1]!).digest('hex');
    Promise.all([redis.hgetall(keys.userToken(hash)), redis.hgetall(keys.accessToken(hash))]).then(
      ([user, oauth]) => {
        const now = Date.now();
        if (user.tokenHash === hash && user.revoked === 'false' && valid(user.expiresAt, now) && oauth.tokenHash === undefined) {
          res.writeHead(204, { 'x-mcp-auth-kind': 'user', 'x-mcp-auth-subject': encodeURIComponent(user.subject ?? '') }).end();
        } else if (
          oauth.tokenHash === hash &&
          oauth.revokedAt === undefined &&
          valid(oauth.expiresAt, now) &&
          user.tokenHash === undefined
        ) {
          res.writeHead(204, { 'x-mcp-auth-kind': 'oauth', 'x-mcp-auth-subject': oauth.clientId ?? '' }).end();
        } else {
          res.writeHead(401).end();
        }
      },
      () => res.writeHead(503).end(),
    );
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  if (cluster.isWorker) return;
  serveChild({ url: `http://127.0.0.1:${port}` }, async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    redis.disconnect();
  });
}
