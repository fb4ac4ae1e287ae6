// The proxy listener: address, workers, and the bounds every request is held to.

import { boolean, integer, list, text, type KeyTree } from '../spec.ts';
import { parseCidr } from '../../model/net-address.ts';
import { MAX_WORKERS, checkPublicUrl } from './shared.ts';

export const PROXY_KEYS = {
  host: text({ tier: 'essential', default: '0.0.0.0', env: 'HOST', description: 'Proxy listener address.' }),
  port: integer({
    tier: 'essential',
    default: 8080,
    min: 0,
    max: 65535,
    env: 'PORT',
    description: 'Proxy listener port (`0`: any free port, printed at start).',
  }),
  publicUrl: text({
    tier: 'essential',
    env: 'PUBLIC_URL',
    defaultText: '`http://localhost:<port>`',
    description:
      'External base URL clients use: in OAuth metadata and `WWW-Authenticate`. The base only: the sidecar adds `/mcp`, so a URL ending in `/mcp`, or with a query or fragment, is refused; a trailing slash is dropped.',
    normalise: (url) => url?.replace(/\/+$/, ''),
    check: (url, label, problems) => {
      if (url !== undefined) checkPublicUrl(label, url, problems);
    },
  }),
  allowedHosts: list({
    tier: 'tuning',
    default: [],
    description:
      "Host names `/mcp` and `/health` answer for besides `PUBLIC_URL`'s (DNS rebinding protection; any other Host gets 421). Loopback names are allowed when the listener is on loopback or `PUBLIC_URL` is unset.",
  }),
  allowedOrigins: list({
    tier: 'tuning',
    default: [],
    description:
      "Browser origins allowed on `/mcp` and `/health` besides `PUBLIC_URL`'s (a request with any other `Origin` gets 403); loopback origins under the same rule as loopback hosts.",
  }),
  trustedProxies: list({
    tier: 'essential',
    default: [],
    description:
      'IPs/CIDRs (e.g. your ingress) whose `X-Forwarded-*` headers are kept and whose `X-Forwarded-For` names the client (its last entry: `IP`, `IP:port` or `[IPv6]:port`).',
    check: (entries, label, problems) => {
      for (const entry of entries)
        if (parseCidr(entry) === undefined) problems.push(`${label} entry "${entry}" is not an IP address or CIDR`);
    },
  }),
  forwardAuth: boolean({
    tier: 'essential',
    default: false,
    env: 'FORWARD_AUTH',
    description:
      'Also answer `/authz` (any method): the authorization service of an ingress that forwards `/mcp` itself (nginx `auth_request`, Caddy `forward_auth`, Traefik `ForwardAuth`, Envoy `ext_authz`); see docs/forward-auth.md.',
  }),
  forwardAuthLogAllowed: boolean({
    tier: 'tuning',
    default: false,
    description:
      "Write an access log line for each allowed `/authz` check too. Off by default: the ingress logs the request it forwards (and can log the identity headers `/authz` returns), and the line is about a quarter of the sidecar's CPU per check. Denied and refused checks are always logged; metrics and audit events are unchanged.",
  }),
  maxBodyBytes: integer({
    tier: 'tuning',
    default: 0,
    min: 0,
    description:
      '`/mcp` request body cap (`0`: none): a larger declared length gets 413, a chunked body is cut when it passes it. Without a policy a `POST` body up to 1 MiB is read whole to find the task ids it names (docs/sessions.md); larger ones stream.',
  }),
  maxHeaderBytes: integer({ tier: 'tuning', default: 16384, min: 1024, max: 1048576, description: 'Larger request headers get 431.' }),
  headersTimeoutMs: integer({
    tier: 'tuning',
    default: 10000,
    min: 100,
    max: 600000,
    description: 'A client must send its request headers within this (slowloris bound).',
  }),
  requestTimeoutMs: integer({
    tier: 'tuning',
    default: 300000,
    min: 0,
    max: 86400000,
    description: 'A client must send its whole request body within this; responses are not bounded.',
  }),
  shutdownGraceMs: integer({
    tier: 'tuning',
    default: 10000,
    min: 0,
    max: 600000,
    description: 'On SIGTERM, in-flight requests get this long to finish.',
  }),
  workers: integer({
    tier: 'tuning',
    default: 1,
    min: 0,
    max: MAX_WORKERS,
    env: 'WORKERS',
    description:
      'Proxy worker processes sharing the proxy port (`node:cluster`); `1`: one process, no cluster; `0`: one per available CPU, at most 64. With more than one, the primary process serves the admin listener and `/metrics` (summed over workers). Needs the Redis store.',
  }),
  handleIdleMs: integer({
    tier: 'tuning',
    default: 86400000,
    min: 1000,
    max: 2592000000,
    description:
      "How long an upstream's MCP session id or task id stays bound to the caller that received it after its last use (sliding); a request presenting one bound to another caller gets the upstream's own 404 / unknown-task answer (docs/sessions.md). Set it at least as long as the upstream keeps an idle session.",
  }),
  streamRecheckMs: integer({
    tier: 'tuning',
    default: 30000,
    min: 50,
    max: 3600000,
    description:
      "Every open SSE stream's token is looked up again this often, in one batch, and the stream ended if it no longer authorizes: the bound for a revocation written into Redis by hand. Revocations through the sidecar end streams at once, expiry at `expiresAt`.",
  }),
} satisfies KeyTree;
