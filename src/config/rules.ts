// Configuration rules that involve more than one key; they run once every key has been read, and add
// their problems to the same list as the keys' own.

import { hostname, networkInterfaces } from 'node:os';
import { checkHttpUrl, type Config } from './keys.ts';
import type { Problems } from './spec.ts';
import { DEFAULT_PROVIDER_NAME } from './keys/idp-providers.ts';
import { isLoopbackHost } from '../model/net-address.ts';
import { signingKeyProblem, signingKeyText } from '../assertion/keys.ts';

/** Rules that involve more than one key; they run once every key is read. */
export function checkWhole(config: Config, problems: Problems): void {
  checkIdp(config.idp, problems);
  checkProviders(config, problems);
  checkExchangeAudience(config, problems);
  checkAssertionKey(config.upstream, problems);
  checkUpstreamCredentials(config, problems);
  checkScim(config, problems);
  checkForwardAuthPolicy(config, problems);
  const loop = upstreamLoop(config);
  if (loop !== undefined) problems.push(loop);
  // Each process would hold its own memory store: a token issued by one worker unknown to the others.
  if (config.store === 'memory' && config.proxy.workers !== 1) {
    problems.push(
      `WORKERS ${config.proxy.workers} needs the Redis store (store: redis): with store: memory each worker process would hold its own tokens and clients. Use WORKERS=1 with the memory store`,
    );
  }
}

/**
 * An ingress shows `/authz` the request's headers, never its body: a rule that reads a call's arguments
 * could not be decided there, and would be passed by the ingress unseen.
 */
function checkForwardAuthPolicy(config: Config, problems: Problems): void {
  const { webhook, webhookSecret } = config.policy.approval;
  if ((webhook === undefined) !== (webhookSecret === undefined))
    problems.push('policy.approval.webhook and policy.approval.webhookSecret go together: the webhook is always signed');
  if (!config.proxy.forwardAuth) return;
  for (const rule of config.policy.rules?.rules ?? []) {
    if (rule.arguments !== undefined)
      problems.push(
        `policy rule "${rule.name}" has arguments, but proxy.forwardAuth is on: an ingress does not show /authz the body, so arguments cannot be decided there`,
      );
    if (rule.effect === 'approve')
      problems.push(
        `policy rule "${rule.name}" has effect: approve, but proxy.forwardAuth is on: an ingress does not show /authz the body, so a call cannot be bound to its arguments and held there`,
      );
  }
}

/** The operator's signing key, when given: one source, and a P-256 private key (its bytes never in a problem). */
function checkAssertionKey(upstream: Config['upstream'], problems: Problems): void {
  if (upstream.assertionKey !== undefined && upstream.assertionKeyFile !== undefined) {
    problems.push('UPSTREAM_ASSERTION_KEY and UPSTREAM_ASSERTION_KEY_FILE are both set: give the assertion signing key once');
    return;
  }
  const given = signingKeyText(upstream);
  if (given === undefined) return;
  if (given.error !== undefined) problems.push(given.error);
  else {
    const problem = signingKeyProblem(given.text);
    if (problem !== undefined) problems.push(`${given.label}: ${problem}`);
  }
  if (!upstream.assertion)
    problems.push(`${given.label} is set but upstream.assertion (UPSTREAM_ASSERTION) is not true: nothing would be signed`);
}

/** Plain http only to this machine: secrets, codes and tokens travel on these URLs. */
function requireHttpsOffLoopback(label: string, url: string | undefined, problems: Problems): void {
  if (url === undefined || !URL.canParse(url)) return; // unset, or already reported
  const parsed = new URL(url);
  if (parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname))
    problems.push(`${label} must be an https:// URL (plain http only on a loopback host: localhost, 127.0.0.0/8 or [::1])`);
}

/**
 * The user's own upstream credential: each mode with every setting it needs, and no setting that
 * nothing would read (a typo'd mode must not leave a configured provider silently unused).
 */
function checkUpstreamCredentials(config: Config, problems: Problems): void {
  const { mode, key, audience, serviceToken, provider } = config.upstream.credentials;
  const signIn = config.idp.issuer !== undefined && config.idp.clientId !== undefined && config.idp.clientSecret !== undefined;
  const providerSet = Object.entries(provider)
    .filter(([, v]) => v !== undefined)
    .map(([k]) => `upstream.credentials.provider.${k}`);
  if (mode === 'none') {
    const unused = [
      ...(key !== undefined ? ['UPSTREAM_CREDENTIALS_KEY'] : []),
      ...(audience !== undefined ? ['UPSTREAM_CREDENTIALS_AUDIENCE'] : []),
      ...(serviceToken !== undefined ? ['upstream.credentials.serviceToken'] : []),
      ...providerSet,
    ];
    if (unused.length > 0)
      problems.push(
        `${unused.join(', ')} ${unused.length === 1 ? 'is' : 'are'} set but UPSTREAM_CREDENTIALS (upstream.credentials.mode) is none: nothing would use ${unused.length === 1 ? 'it' : 'them'}. Set the mode, or remove ${unused.length === 1 ? 'it' : 'them'}`,
      );
    return;
  }
  if (key === undefined) {
    problems.push(
      `UPSTREAM_CREDENTIALS is ${mode} but UPSTREAM_CREDENTIALS_KEY (upstream.credentials.key) is not set: the tokens kept for users are encrypted with it. Generate one with \`openssl rand -hex 32\`, the same on every replica`,
    );
  }
  if ((mode === 'idp' || mode === 'token-exchange') && !signIn) {
    problems.push(
      `UPSTREAM_CREDENTIALS is ${mode} but browser sign-in is not configured (IDP_ISSUER, IDP_CLIENT_ID and IDP_CLIENT_SECRET): the user's IdP tokens come from signing in there`,
    );
  }
  if (mode === 'token-exchange' && audience === undefined) {
    problems.push(
      'UPSTREAM_CREDENTIALS is token-exchange but UPSTREAM_CREDENTIALS_AUDIENCE (upstream.credentials.audience) is not set: the IdP must be told which API the exchanged token is for',
    );
  }
  if (mode !== 'token-exchange' && audience !== undefined)
    problems.push(`UPSTREAM_CREDENTIALS_AUDIENCE is set but UPSTREAM_CREDENTIALS is ${mode}: only token-exchange uses it`);
  if (mode !== 'oauth') {
    if (providerSet.length > 0)
      problems.push(`${providerSet.join(', ')} set but UPSTREAM_CREDENTIALS is ${mode}: only oauth (connected accounts) uses a provider`);
    return;
  }
  const endpoints = [provider.authorizationEndpoint, provider.tokenEndpoint].filter((v) => v !== undefined).length;
  if (provider.issuer === undefined && endpoints === 0) {
    problems.push(
      'UPSTREAM_CREDENTIALS is oauth but no provider is configured: set UPSTREAM_PROVIDER_ISSUER (OpenID discovery), or UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT and UPSTREAM_PROVIDER_TOKEN_ENDPOINT, with UPSTREAM_PROVIDER_CLIENT_ID',
    );
  } else if (provider.issuer !== undefined && endpoints > 0) {
    problems.push(
      'UPSTREAM_PROVIDER_ISSUER and UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT/UPSTREAM_PROVIDER_TOKEN_ENDPOINT are both set: give the issuer (discovery) or both endpoints, not both',
    );
  } else if (provider.issuer === undefined && endpoints === 1) {
    problems.push('UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT and UPSTREAM_PROVIDER_TOKEN_ENDPOINT must be set together');
  }
  // Without any provider the problem above already asks for the client id too.
  if (provider.clientId === undefined && (provider.issuer !== undefined || endpoints > 0))
    problems.push("UPSTREAM_CREDENTIALS is oauth but UPSTREAM_PROVIDER_CLIENT_ID is not set: the sidecar's client id at the provider");
  requireHttpsOffLoopback('UPSTREAM_PROVIDER_ISSUER', provider.issuer, problems);
  requireHttpsOffLoopback('UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT', provider.authorizationEndpoint, problems);
  requireHttpsOffLoopback('UPSTREAM_PROVIDER_TOKEN_ENDPOINT', provider.tokenEndpoint, problems);
}

/**
 * Three features share IDP_ISSUER: the token exchange (with audience and JWKS), browser sign-in (with
 * the sidecar's client id and secret) and identity assertion grants (idJag, with the JWKS). Each is on
 * with all its settings, or off with none.
 */
function checkIdp(idp: Config['idp'], problems: Problems): void {
  const exchangeSet = [idp.audience, idp.jwksUrl].filter((v) => v !== undefined).length;
  const signInSet = [idp.clientId, idp.clientSecret].filter((v) => v !== undefined).length;
  // The ID-JAG grant verifies with the IdP's keys alone: IDP_JWKS_URL without IDP_AUDIENCE is its setting.
  const idJagKeysOnly = idp.idJag && idp.audience === undefined && idp.jwksUrl !== undefined;
  if ((exchangeSet === 1 && !idJagKeysOnly) || (exchangeSet === 2 && idp.issuer === undefined)) {
    problems.push('IDP_ISSUER, IDP_AUDIENCE and IDP_JWKS_URL must be set together (or none of them)');
  }
  const providerKeys = idp.providers?.some((p) => p.jwksUrl !== undefined) ?? false;
  if (idp.idJag && (idp.issuer === undefined || idp.jwksUrl === undefined) && !(idp.issuer === undefined && providerKeys)) {
    problems.push(
      "idp.idJag (IDP_ID_JAG) is true but IDP_ISSUER and IDP_JWKS_URL are not both set: identity assertion grants are verified against the identity provider's issuer and keys. Set both, or turn idp.idJag off",
    );
  }
  if (signInSet === 1 || (signInSet === 2 && idp.issuer === undefined)) {
    problems.push('IDP_ISSUER, IDP_CLIENT_ID and IDP_CLIENT_SECRET must be set together for browser sign-in (or none of them)');
  }
  if (idp.issuer !== undefined && exchangeSet === 0 && signInSet === 0 && !idp.idJag) {
    problems.push(
      'IDP_ISSUER is set alone: add IDP_AUDIENCE and IDP_JWKS_URL (token exchange) and/or IDP_CLIENT_ID and IDP_CLIENT_SECRET (browser sign-in) and/or IDP_JWKS_URL with IDP_ID_JAG=true (identity assertion grants)',
    );
  }
  if (idp.issuer !== undefined && signInSet === 2) {
    checkHttpUrl('IDP_ISSUER', idp.issuer, problems);
    // The browser sign-in's secrets and codes travel to the IdP: plain http only on this machine.
    if (/^http:/i.test(idp.issuer) && !(URL.canParse(idp.issuer) && isLoopbackHost(new URL(idp.issuer).hostname))) {
      problems.push(
        'IDP_ISSUER must be an https:// URL for browser sign-in (plain http only on a loopback host: localhost, 127.0.0.0/8 or [::1])',
      );
    }
  }
}

/**
 * `idp.providers` beside the IDP_* provider: `default` is its name, an issuer is one provider's, each
 * entry is usable for something, and browser sign-in's secrets travel to a provider over https. The
 * upstream's own credential (modes idp and token-exchange) is the one IdP's tokens: one provider only.
 */
function checkProviders(config: Config, problems: Problems): void {
  const { idp } = config;
  const providers = idp.providers ?? [];
  for (const [i, entry] of providers.entries()) {
    const at = `idp.providers[${i}]`;
    if (idp.issuer !== undefined && entry.name === DEFAULT_PROVIDER_NAME)
      problems.push(`${at}.name "${DEFAULT_PROVIDER_NAME}" is the IDP_ISSUER provider's name: choose another`);
    if (idp.issuer !== undefined && entry.issuer === idp.issuer)
      problems.push(`${at}.issuer is IDP_ISSUER too: a provider is configured once (a person is the issuer with the subject)`);
    if ((entry.audience === undefined) !== (entry.jwksUrl === undefined) && !(idp.idJag && entry.jwksUrl !== undefined))
      problems.push(`${at}: audience and jwksUrl must be set together (token exchange), or neither`);
    if (entry.clientSecret === undefined && entry.jwksUrl === undefined)
      problems.push(
        `${at}: give clientSecret (browser sign-in) and/or audience with jwksUrl (token exchange): as it is, nothing would use it`,
      );
    if (entry.clientSecret !== undefined) requireHttpsOffLoopback(`${at}.issuer`, entry.issuer, problems);
  }
  const several = (idp.issuer !== undefined ? 1 : 0) + providers.length > 1;
  const { mode } = config.upstream.credentials;
  if (several && (mode === 'idp' || mode === 'token-exchange'))
    problems.push(
      `UPSTREAM_CREDENTIALS is ${mode} but several identity providers are configured (idp.providers): the upstream credential is one IdP's tokens. Use one provider with this mode, or mode oauth`,
    );
}

/**
 * The exchange's audience must not be this authorization server's issuer while ID-JAG is on: an IdP
 * issues ID-JAGs for that audience, and an exchange that took them would turn a single-use grant,
 * bound to one authenticated client, into a seven-day user token needing no client authentication.
 * (The exchange also refuses the ID-JAG type; this keeps the two grants' audiences apart as well.)
 * The issuer is PUBLIC_URL, or `http://localhost:<port>` without it; a trailing slash is the same.
 */
function checkExchangeAudience(config: Config, problems: Problems): void {
  const { audience, idJag } = config.idp;
  if (!idJag || audience === undefined) return;
  const issuer = config.proxy.publicUrl ?? (config.proxy.port !== 0 ? `http://localhost:${config.proxy.port}` : undefined);
  if (issuer === undefined || audience.replace(/\/+$/, '') !== issuer.replace(/\/+$/, '')) return;
  problems.push(
    `IDP_AUDIENCE (idp.audience) equals this authorization server's issuer PUBLIC_URL (proxy.publicUrl) ${issuer} while IDP_ID_JAG (idp.idJag) is true: identity assertion grants (ID-JAGs) are issued for that audience, and the token exchange must not accept them. Give the token exchange its own audience, or turn idp.idJag off`,
  );
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]', '']);

/** Names this machine answers to on loopback (and, for a wildcard listener, on every interface). */
function isLoopback(host: string): boolean {
  return isLoopbackHost(host) || WILDCARD_HOSTS.has(host);
}

function isOwnAddress(host: string): boolean {
  if (isLoopback(host) || host === hostname().toLowerCase()) return true;
  const bare = host.replace(/^\[|\]$/g, '');
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address.toLowerCase() === bare));
}

/**
 * A problem when the upstream URL is the sidecar's own proxy listener (or its public URL): every
 * request would be forwarded to itself until sockets run out.
 */
function upstreamLoop(config: Config): string | undefined {
  let upstream: URL;
  try {
    upstream = new URL(config.upstream.url);
  } catch {
    return undefined; // already reported
  }
  const upstreamHost = upstream.hostname.toLowerCase();
  const upstreamPort = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
  const listenHost = config.proxy.host.toLowerCase();
  const sameHost = WILDCARD_HOSTS.has(listenHost)
    ? isOwnAddress(upstreamHost)
    : isLoopback(listenHost)
      ? isLoopback(upstreamHost)
      : upstreamHost === listenHost || upstreamHost === `[${listenHost}]`;
  if (config.proxy.port !== 0 && upstreamPort === config.proxy.port && sameHost) {
    return `UPSTREAM_URL ${upstream.origin} is this sidecar's own proxy listener (${config.proxy.host}:${config.proxy.port}): requests would loop. Point it at the MCP server behind the sidecar`;
  }
  const publicUrl = config.proxy.publicUrl;
  if (publicUrl !== undefined && `${upstream.origin}${upstream.pathname}`.startsWith(`${publicUrl}/`)) {
    return `UPSTREAM_URL is under PUBLIC_URL ${publicUrl}, the address clients reach this sidecar at: requests would loop. Point it at the MCP server behind the sidecar`;
  }
  return undefined;
}

/** SCIM's token opens SCIM alone: it may not be the master token; its provider must be one configured. */
function checkScim(config: Config, problems: Problems): void {
  const { token, provider } = config.scim;
  if (token === '') return;
  if (token === config.masterToken)
    problems.push("SCIM_TOKEN must differ from BEARER_SECRET_MASTER: the directory's token must not open the admin operations");
  // The providers' names as src/oauth/providers.ts resolves them: the IDP_* one first.
  const names = [...(config.idp.issuer !== undefined ? [DEFAULT_PROVIDER_NAME] : []), ...(config.idp.providers ?? []).map((p) => p.name)];
  const known = names.length > 0 ? names : [DEFAULT_PROVIDER_NAME];
  if (!known.includes(provider)) {
    const configured = known.length === 1 ? `the one configured is "${known[0]}"` : `configured: ${known.join(', ')}`;
    problems.push(`scim.provider "${provider}" names no configured identity provider (${configured})`);
  }
  if (names.length === 0)
    problems.push(
      "SCIM_TOKEN is set but no identity provider is configured (IDP_ISSUER): the directory's people could not be matched to anyone signing in",
    );
}
