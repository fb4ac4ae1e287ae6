// Makes a misconfigured upstream visible: why a forwarded request failed (with a hint for the usual
// first-day mistakes), logged at warn at most once per cause and interval so a dead upstream cannot
// flood the log; and a probe at start-up that warns when the upstream is unreachable or has no MCP
// endpoint at the configured path. Neither refuses anything: the upstream may come up later.

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Clock } from '../model/clock.ts';
import { describe, type Logger } from '../observability/logger.ts';

/** Lets an upstream's log (or a test's fake upstream) tell the probe from client traffic. */
export const PROBE_USER_AGENT = 'mcp-bearer-proxy start-up probe';

/** One warn line per cause and this interval; the next line says how many were left out. */
export const UPSTREAM_WARN_INTERVAL_MS = 30_000;

export interface UpstreamFailure {
  /** The socket, TLS or parser error code (`ECONNREFUSED`, `EPROTO`, ...), or `unknown`. */
  code: string;
  message: string;
  /** What is most likely wrong, when the code says. */
  hint: string | undefined;
}

/** Explains an error of a request to `upstreamUrl`. The URL carries no credentials (checked in config). */
export function describeUpstreamFailure(err: Error, upstreamUrl: string): UpstreamFailure {
  const url = new URL(upstreamUrl);
  const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
  const where = `${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
  const tlsToPlain = /wrong version number|packet length too long|unknown protocol|ERR_SSL/i.test(`${code} ${err.message}`);
  let hint: string | undefined;
  if (code === 'ECONNREFUSED') hint = `nothing listens on ${where}: is the upstream running, and is UPSTREAM_URL's port right?`;
  else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') hint = `the host name ${url.hostname} does not resolve: check UPSTREAM_URL's host`;
  else if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ETIMEDOUT')
    hint = `${where} cannot be reached from here (routing, firewall)`;
  else if (url.protocol === 'https:' && tlsToPlain)
    hint = `the TLS handshake with ${where} failed: if the upstream speaks plain HTTP, UPSTREAM_URL must start with http://`;
  else if (url.protocol === 'https:' && /^(CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|ERR_TLS_CERT)/.test(code))
    hint = `the upstream's TLS certificate is not trusted (${code})`;
  else if (url.protocol === 'http:' && (code.startsWith('HPE_') || code === 'ECONNRESET'))
    hint = `${where} did not answer in HTTP: if the upstream speaks TLS, UPSTREAM_URL must start with https://`;
  return { code, message: err.message, hint };
}

/**
 * The forwarder's error callback: one warn line per cause code per UPSTREAM_WARN_INTERVAL_MS, then a
 * count of the failures left out. The client gets its 502 either way.
 */
export function upstreamFailureLogger(
  logger: Logger,
  clock: Clock,
  upstreamUrl: string,
  intervalMs = UPSTREAM_WARN_INTERVAL_MS,
): (err: Error) => void {
  const upstream = new URL(upstreamUrl);
  const target = `${upstream.origin}${upstream.pathname}`;
  const last = new Map<string, { at: number; suppressed: number }>();
  return (err) => {
    const failure = describeUpstreamFailure(err, upstreamUrl);
    const now = clock.now();
    const seen = last.get(failure.code);
    if (seen !== undefined && now - seen.at < intervalMs) {
      seen.suppressed++;
      return;
    }
    last.set(failure.code, { at: now, suppressed: 0 });
    logger.warn(
      { upstream: target, err: describe(err), hint: failure.hint, ...(seen ? { suppressed: seen.suppressed } : {}) },
      'upstream request failed: answered 502',
    );
  };
}

/** What the upstream sees of a health probe: no credential, no identity headers, a name it can log. */
export const PROBE_HEADERS = { accept: 'application/json', 'user-agent': 'mcp-bearer-proxy-health-probe' } as const;

/**
 * One `GET` of `upstreamUrl` with `headers`, closed as soon as the response's headers arrive (a server
 * may answer it with an SSE stream): its status, or the error that stopped it (ETIMEDOUT past
 * `timeoutMs`). The one request both probes send, read two ways.
 */
function probe(upstreamUrl: string, timeoutMs: number, headers: Record<string, string>): Promise<{ status: number } | { error: Error }> {
  const url = new URL(upstreamUrl);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = send(url, { method: 'GET', headers, timeout: timeoutMs, agent: false });
    req.once('response', (res: IncomingMessage) => {
      res.destroy();
      req.destroy();
      resolve({ status: res.statusCode ?? 0 });
    });
    req.once('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
    req.on('error', (error: Error) => resolve({ error }));
    req.end();
  });
}

/** `/health`'s reading: any HTTP answer from the upstream within the bound counts as reachable. */
export async function upstreamAnswers(upstreamUrl: string, timeoutMs: number): Promise<boolean> {
  return 'status' in (await probe(upstreamUrl, timeoutMs, PROBE_HEADERS));
}

/**
 * The start-up reading: what is wrong, or undefined when the endpoint answered anything but 404 (an
 * MCP endpoint answers a session-less GET with 400 or 405, or a stream).
 */
export async function probeMcpEndpoint(upstreamUrl: string, timeoutMs: number): Promise<string | undefined> {
  const url = new URL(upstreamUrl);
  const target = `${url.origin}${url.pathname}`;
  const answer = await probe(upstreamUrl, timeoutMs, { accept: 'application/json, text/event-stream', 'user-agent': PROBE_USER_AGENT });
  if ('status' in answer) {
    return answer.status === 404
      ? `the upstream answers ${target} with 404: UPSTREAM_URL must name the MCP endpoint (often /mcp); every request would get the upstream's 404`
      : undefined;
  }
  const failure = describeUpstreamFailure(answer.error, upstreamUrl);
  return `the upstream ${target} cannot be reached (${failure.code}: ${failure.message})${failure.hint ? `: ${failure.hint}` : ''}; requests get 502 until it can`;
}
