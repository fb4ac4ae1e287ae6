// Debian's chromium for the browser tests, driven by playwright-core (which downloads no browser of
// its own). The flags are the ones this machine needs: headless, no sandbox as root, and nothing that
// reaches for Google's hosts (the closed network refuses those connections at every start).

import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Starts the browser; a missing chromium is an error naming the package (.ci/run installs it), never a skip. */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
}

/** A site the browser visits beside the sidecar: its origin, and how to stop it. */
export interface LoopbackSite {
  /** `http://127.0.0.1:<port>`: an origin of its own, never the sidecar's. */
  readonly origin: string;
  /** Closes its connections (a browser keeps them alive) and stops it. */
  close(): Promise<void>;
}

/**
 * A site on a free loopback port whose every request `handler` answers: the client's redirect
 * receiver, or another site's page (an attacker's form, a frame) in a browser test.
 */
export async function startLoopbackSite(handler: RequestListener): Promise<LoopbackSite> {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
