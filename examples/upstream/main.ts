// Runs the reference MCP upstream as a standalone process (`npm run upstream`), configured by
// UPSTREAM_HOST / UPSTREAM_PORT, and shuts it down cleanly on SIGINT/SIGTERM. With
// UPSTREAM_ASSERTION_JWKS_URL, UPSTREAM_ASSERTION_ISSUER and UPSTREAM_ASSERTION_AUDIENCE it refuses
// every request that does not carry a valid caller assertion from the sidecar. With
// UPSTREAM_ALLOWED_HOSTS (comma-separated host names, no ports) it refuses any other Host with 403
// (DNS-rebinding protection; behind an ingress in forward-auth, the public host it passes on).

import { startUpstream } from './server.ts';

const { UPSTREAM_ASSERTION_JWKS_URL: jwksUrl, UPSTREAM_ASSERTION_ISSUER: issuer, UPSTREAM_ASSERTION_AUDIENCE: audience } = process.env;
const assertionSettings = [jwksUrl, issuer, audience].filter((v) => v !== undefined && v !== '').length;
if (assertionSettings !== 0 && assertionSettings !== 3) {
  process.stderr.write(
    'UPSTREAM_ASSERTION_JWKS_URL, UPSTREAM_ASSERTION_ISSUER and UPSTREAM_ASSERTION_AUDIENCE must be set together (or none of them)\n',
  );
  process.exit(2);
}

const allowedHosts = (process.env.UPSTREAM_ALLOWED_HOSTS ?? '')
  .split(',')
  .map((h) => h.trim())
  .filter((h) => h !== '');

const upstream = await startUpstream({
  host: process.env.UPSTREAM_HOST ?? '127.0.0.1',
  port: Number(process.env.UPSTREAM_PORT ?? 3000),
  assertion: assertionSettings === 3 ? { jwksUrl: jwksUrl!, issuer: issuer!, audience: audience! } : undefined,
  ...(allowedHosts.length > 0 ? { allowedHosts } : {}),
});
process.stdout.write(
  `upstream listening on ${upstream.url}${assertionSettings === 3 ? ` (verifying caller assertions from ${issuer})` : ''}\n`,
);

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
