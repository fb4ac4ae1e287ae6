// Runs the reference MCP upstream as a standalone process (`npm run upstream`), configured by
// UPSTREAM_HOST / UPSTREAM_PORT, and shuts it down cleanly on SIGINT/SIGTERM.

import { startUpstream } from './server.ts';

const upstream = await startUpstream({
  host: process.env.UPSTREAM_HOST ?? '127.0.0.1',
  port: Number(process.env.UPSTREAM_PORT ?? 3000),
});
process.stdout.write(`upstream listening on ${upstream.url}\n`);

let stopping = false;
async function stop(): Promise<void> {
  // A second signal while closing must not start a second shutdown.
  if (stopping) return;
  stopping = true;
  try {
    await upstream.close();
    process.exit(0);
  } catch (err) {
    process.stderr.write(`upstream shutdown failed: ${String(err)}\n`);
    process.exit(1);
  }
}

process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
