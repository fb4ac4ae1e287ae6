// Binding the proxy and admin listeners, and the warning when the admin listener is reachable from
// a public address.

import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Logger } from '../observability/logger.ts';
import { publicReach } from '../model/net-address.ts';

/**
 * The admin listener holds every credential operation behind one secret: on a public address a scanner
 * finds it. Start anyway (that may be intended, behind a firewall), but say so loudly. 0.0.0.0 in a pod
 * or container only reaches its private network, and does not warn.
 */
export function warnIfAdminExposed(server: Server, logger: Logger): void {
  const bound = (server.address() as AddressInfo).address;
  const reach = publicReach(bound, networkInterfaces());
  if (reach.length === 0) return;
  logger.warn(
    { adminAddress: bound, publicAddresses: reach },
    `ADMIN LISTENER EXPOSED: it listens on ${bound}, reachable on the public address(es) ${reach.join(', ')}. Anyone who can ` +
      'reach it can try the master token (failed attempts are throttled per address, not stopped). Bind ADMIN_HOST to ' +
      '127.0.0.1 or a private address, or firewall the port (docs/security.md, section 1).',
  );
}

/** Where a listener binds (`proxy.port` and `proxy.host` of the configuration, `admin.port` and `admin.host`). */
interface Bind {
  readonly port: number;
  readonly host: string;
}

/** Binding each listener (a worker process binds only the proxy's, its primary only the admin's). */
export function listenersOf(
  config: { readonly proxy: Bind; readonly admin: Bind },
  proxyServer: Server,
  adminServer: Server,
  logger: Logger,
  proxyBound: (port: number) => void,
) {
  return {
    async listenProxy(): Promise<string> {
      proxyServer.listen(config.proxy.port, config.proxy.host);
      await once(proxyServer, 'listening');
      proxyBound((proxyServer.address() as AddressInfo).port);
      return urlOf(proxyServer);
    },
    async listenAdmin(): Promise<string> {
      adminServer.listen(config.admin.port, config.admin.host);
      await once(adminServer, 'listening');
      warnIfAdminExposed(adminServer, logger);
      return urlOf(adminServer);
    },
  };
}

export function urlOf(server: Server): string {
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
