// Debian's chromium for the browser tests, driven by playwright-core (which downloads no browser of
// its own). The flags are the ones this machine needs: headless, no sandbox as root, and nothing that
// reaches for Google's hosts (the closed network refuses those connections at every start).

import { existsSync } from 'node:fs';
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
