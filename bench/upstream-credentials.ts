// What each upstream-credentials mode costs, in `npm run bench` (BENCH_ONLY=upstream-credentials): the
// same fast upstream, the same `tools/call` POST with the same user-grade token, through sidecars that
// differ only in `upstream.credentials.mode`:
//  - none: nothing added (the base);
//  - idp: the user's IdP access token, kept (encrypted) as browser sign-in keeps it, valid for an hour;
//  - token-exchange: the same kept IdP token, exchanged once (RFC 8693) at a real OpenID provider during
//    the warm-up, then served from the kept exchanged token;
//  - oauth: a connected account's token, kept as the connect callback keeps it.
// Every sidecar has the same IdP (oidc-provider in this process, test/support/exchange-idp.ts); the
// IdP counts every request it gets. With every credential cached, the hot path must not call it: a
// request to the IdP after the warm-up fails the scenario.
// Targets alternated round-robin, wrk, median of the rounds, CPU per request from /proc.
// With BENCH_BASELINE, one more target: mode idp on the baseline commit's src/, to measure a change of
// the credential's hot path in the same run.

import { randomBytes } from 'node:crypto';
import { buildConfig } from '../src/config/load.ts';
import { openStore } from '../src/app.ts';
import { systemClock } from '../src/model/clock.ts';
import { generateToken, hashToken } from '../src/model/credentials.ts';
import { createLogger } from '../src/observability/logger.ts';
import { CredentialCipher } from '../src/upstream-credentials/cipher.ts';
import { parseCredentialKey } from '../src/config/keys/shared.ts';
import { CredentialVault } from '../src/upstream-credentials/vault.ts';
import { startExchangeIdp } from '../test/support/exchange-idp.ts';
import { alternatedCells, type CostCell } from './alternated.ts';
import { Child, fmt, table } from './lib.ts';
import { warmUp, writeWrkScript } from './wrk.ts';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}';
const MODES = ['none', 'idp', 'token-exchange', 'oauth'] as const;
type Mode = (typeof MODES)[number];
/** A measured target: a mode, or mode idp on the baseline's src/. */
type Target = Mode | 'idp at the baseline';
const AUDIENCE = 'internal-api';
const SUBJECT = 'bench-credential-user';
const KEY_PREFIX = 'mcpauth-upcred:';

export type UpstreamCredentialsCell = CostCell;

export interface UpstreamCredentialsResults {
  rounds: number;
  seconds: number;
  /** Per connection count, per target. */
  cells: Map<number, Map<Target, UpstreamCredentialsCell>>;
  /** Requests the IdP got during the warm-up (discovery, the one exchange) and during the measured rounds (must be 0). */
  idpRequestsWarmup: number;
  idpRequestsMeasured: number;
  /** Token exchanges the IdP answered in the whole run (one, during the warm-up). */
  exchanges: number;
}

export interface UpstreamCredentialsContext {
  redisUrl: string;
  tmp: string;
  connections: number[];
  rounds: number;
  seconds: number;
  startUpstream(): Promise<Child>;
  /** `srcDir`: another copy of src/ (the baseline's). */
  startSidecar(name: string, config: Record<string, unknown>, srcDir?: string): Promise<Child>;
  /** The baseline commit's src/, when the run has one. */
  baselineSrc?: string | undefined;
  log(line: string): void;
}

export async function upstreamCredentialsScenario(ctx: UpstreamCredentialsContext): Promise<UpstreamCredentialsResults> {
  const clientId = 'mcp-bearer-proxy';
  const clientSecret = randomBytes(32).toString('hex');
  const idp = await startExchangeIdp({
    clientId,
    clientSecret,
    // No browser signs in during the bench: the callback is never used.
    redirectUris: () => ['http://127.0.0.1:9/oauth/callback'],
    users: { bench: { sub: SUBJECT, email: 'bench@example.com' } },
    audiences: { [AUDIENCE]: { lifetimeSeconds: 3600 } },
  });
  try {
    const upstream = await ctx.startUpstream();
    const key = randomBytes(32).toString('hex');
    const base = {
      masterToken: randomBytes(32).toString('hex'),
      store: 'redis',
      redis: { url: ctx.redisUrl, keyPrefix: KEY_PREFIX, lookupCache: 'off' },
      upstream: { url: upstream.urls.url! },
      proxy: { host: '127.0.0.1', port: 0, shutdownGraceMs: 1000 },
      admin: { host: '127.0.0.1', port: 0 },
      rateLimits: { failedAuthPerMinute: 0 },
      logLevel: 'warn',
      idp: { issuer: idp.issuer, clientId, clientSecret },
    };
    const providerHost = new URL(idp.issuer).host;
    const credentials: Record<Mode, Record<string, unknown>> = {
      none: { mode: 'none' },
      idp: { mode: 'idp', key },
      'token-exchange': { mode: 'token-exchange', key, audience: AUDIENCE },
      oauth: {
        mode: 'oauth',
        key,
        provider: {
          authorizationEndpoint: `${idp.issuer}/auth`,
          tokenEndpoint: `${idp.issuer}/token`,
          clientId: 'upstream-app',
          clientSecret,
        },
      },
    };

    // The user and their kept credentials, written through the store and the vault as the sidecar writes them.
    const store = await openStore(buildConfig(base, {}), systemClock, createLogger('warn'));
    const userToken = generateToken();
    try {
      const now = Date.now();
      await store.putUserToken({
        tokenHash: hashToken(userToken),
        subject: SUBJECT,
        issuer: idp.issuer,
        createdAt: now,
        expiresAt: now + 3_600_000,
      });
      const vault = new CredentialVault({ store, cipher: new CredentialCipher(parseCredentialKey(key) as Buffer), clock: systemClock });
      const kept = await idp.mintAccessToken(SUBJECT);
      await vault.save(
        { subject: SUBJECT, issuer: idp.issuer, provider: 'idp' },
        { accessToken: kept.accessToken, expiresAt: now + kept.expiresIn * 1000 },
      );
      await vault.save(
        { subject: SUBJECT, issuer: idp.issuer, provider: `oauth:${providerHost}` },
        { accessToken: randomBytes(20).toString('hex'), expiresAt: now + 3_600_000 },
      );
    } finally {
      await store.close();
    }

    const variants: Array<{ key: Target; child: Child }> = [];
    for (const mode of MODES)
      variants.push({
        key: mode,
        child: await ctx.startSidecar(`credentials ${mode}`, { ...base, upstream: { ...base.upstream, credentials: credentials[mode] } }),
      });
    if (ctx.baselineSrc !== undefined)
      variants.push({
        key: 'idp at the baseline',
        child: await ctx.startSidecar(
          'credentials idp, baseline',
          { ...base, upstream: { ...base.upstream, credentials: credentials.idp } },
          ctx.baselineSrc,
        ),
      });
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${userToken}`,
    };
    const script = writeWrkScript(ctx.tmp, 'upstream-credentials', { method: 'POST', headers, body: BODY });
    for (const v of variants) {
      const res = await fetch(`${v.child.urls.proxyUrl}/mcp`, { method: 'POST', headers, body: BODY });
      const text = await res.text();
      // A user without a usable credential gets HTTP 200 with the MCP error -32042: not a forwarded call.
      if (res.status !== 200 || !text.includes('"result"'))
        throw new Error(`upstream-credentials scenario: mode ${v.key} answered ${res.status} ${text.slice(0, 200)}`);
      await warmUp(`${v.child.urls.proxyUrl}/mcp`, script);
    }
    const idpRequestsWarmup = idp.requests();
    if (idp.exchanges() !== 1)
      throw new Error(`upstream-credentials scenario: ${idp.exchanges()} token exchanges during the warm-up, expected 1`);

    const cells = await alternatedCells({ name: 'upstream-credentials', variants, script }, ctx);
    const idpRequestsMeasured = idp.requests() - idpRequestsWarmup;
    // The cached modes must serve the hot path without the IdP: fail loudly if any request reached it.
    if (idpRequestsMeasured !== 0)
      throw new Error(
        `upstream-credentials scenario: the IdP got ${idpRequestsMeasured} requests after the warm-up; the cached modes must make none`,
      );
    return { rounds: ctx.rounds, seconds: ctx.seconds, cells, idpRequestsWarmup, idpRequestsMeasured, exchanges: idp.exchanges() };
  } finally {
    await idp.close();
  }
}

export function upstreamCredentialsReport(r: UpstreamCredentialsResults): string[] {
  const out = ['### Upstream credentials: what each mode costs', ''];
  out.push(
    `The same sidecar, fast upstream and user-grade token, the same \`tools/call\` POST (${BODY.length} bytes), \`upstream.credentials.mode\` none, idp (the kept IdP token), token-exchange (exchanged once at a real OpenID provider in the warm-up, then the kept exchanged token) and oauth (a connected account's kept token). The IdP got ${r.idpRequestsWarmup} requests during the warm-up (${r.exchanges} exchange) and ${r.idpRequestsMeasured} during the measured rounds. wrk, ${r.rounds} rounds × ${r.seconds} s, alternated, median.`,
    '',
  );
  const rows: string[][] = [];
  for (const [connections, byMode] of r.cells) {
    const none = byMode.get('none')!;
    for (const [mode, cell] of byMode)
      rows.push([
        String(connections),
        mode,
        fmt.int(cell.rps),
        fmt.ratio(cell.rps / none.rps),
        fmt.ms(cell.p50),
        fmt.signedMs(cell.p50 - none.p50),
        cell.cpuPerRequest.toFixed(0),
        (cell.cpuPerRequest - none.cpuPerRequest).toFixed(0),
      ]);
  }
  out.push(
    table(['conns', 'target', 'req/s', 'vs none', 'p50 ms', 'added p50 ms', 'sidecar CPU µs/req', 'CPU µs/req over none'], rows),
    '',
  );
  return out;
}
