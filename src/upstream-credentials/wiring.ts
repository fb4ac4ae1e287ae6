// Upstream credentials as the configured mode builds them: how the proxy delivers the user's
// credential, where sign-in keeps the IdP's tokens, and the connect pages a user without a usable
// credential is sent to. One entry per mode; `none` builds nothing, so the proxy does no work at all.

import * as oidc from 'openid-client';
import type { Config } from '../config/load.ts';
import type { Route } from '../http/serve.ts';
import { clientName } from '../model/clients.ts';
import type { Clock } from '../model/clock.ts';
import { AccountSessions } from '../oauth/account.ts';
import { IdpUnavailable, type IdpSignIn, type IdpTokens } from '../oauth/oidc-client.ts';
import type { Audit } from '../observability/audit.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { TokenStore } from '../store/types.ts';
import type { SignedInUser } from '../model/records.ts';
import { configuredCipher } from './cipher.ts';
import { parseCredentialKey } from '../config/keys/shared.ts';
import { ConnectFlow, providerConfiguration, providerUnavailable, tokensOf, type ConnectProvider } from './connect-flow.ts';
import { ConnectLinks } from './connect-links.ts';
import { UpstreamCredentialDelivery, type CredentialSource } from './delivery.ts';
import { CREDENTIAL_ACTIONS, refreshRecorder } from './events.ts';
import { RefreshingCredentialSource } from './idp-mode.ts';
import { exchangeAtIdp, TokenExchangeSource } from './token-exchange.ts';
import { CredentialVault } from './vault.ts';
import { identityProviders } from '../oauth/providers.ts';

type Settings = Config['upstream']['credentials'];
type IdpSettings = Config['idp'];
type Mode = Settings['mode'];

/** The services upstream credentials use, built once by the sidecar. */
export interface UpstreamCredentialsShared {
  store: TokenStore;
  clock: Clock;
  logger: Logger;
  audit: Audit;
  metrics: Metrics;
  /** The kept credentials; undefined when the mode keeps none. */
  vault: CredentialVault | undefined;
  signIn: IdpSignIn | undefined;
  publicUrl: () => string;
}

/** What the proxy and sign-in get of upstream credentials in a mode that keeps them. */
export interface UpstreamCredentials {
  delivery: UpstreamCredentialDelivery;
  links: ConnectLinks;
  /** What the user is asked to do, for a person (e.g. "connect your GitHub account"). */
  what: string;
  /** Where browser sign-in keeps the IdP's tokens (modes idp and token-exchange). */
  keepIdpTokens: ((user: SignedInUser, tokens: IdpTokens) => Promise<void>) | undefined;
  routes: Route[];
}

/** What every mode builds on. */
interface ModeContext {
  settings: Settings;
  idp: IdpSettings;
  shared: UpstreamCredentialsShared & { vault: CredentialVault };
  issuer: string;
  /** The IdP as an OAuth provider (modes idp and token-exchange connect and renew there). */
  idpConfiguration: ConnectProvider['configuration'];
  /** Each refresh is counted, and audited by user and provider when it renews or ends a credential. */
  recordRefresh: ReturnType<typeof refreshRecorder>;
}

/** One mode's parts: the provider the connect pages send to, and where the proxy's credential comes from. */
interface ModeParts {
  provider: ConnectProvider;
  source: CredentialSource;
  keepIdpTokens?: UpstreamCredentials['keepIdpTokens'];
  /** Mode oauth signs the person in (the account page's session) before connecting. */
  sessions?: AccountSessions;
  what: string;
}

const MODES: Record<Mode, ((context: ModeContext) => ModeParts) | undefined> = {
  none: undefined,
  idp: (context) => {
    const source = idpTokenSource(context);
    return { provider: idpProvider(context), source, keepIdpTokens: keepIdpTokensOf(context), what: SIGN_IN_AGAIN };
  },
  'token-exchange': (context) => {
    const { settings, shared, idpConfiguration } = context;
    const { vault, clock } = shared;
    const audience = settings.audience!;
    const source = new TokenExchangeSource({
      idpTokens: idpTokenSource(context),
      vault,
      clock,
      audience,
      exchange: (subjectToken) => exchangeAtIdp(idpConfiguration, subjectToken, audience, clock),
      isUnavailable: providerUnavailable,
    });
    return { provider: idpProvider(context), source, keepIdpTokens: keepIdpTokensOf(context), what: SIGN_IN_AGAIN };
  },
  oauth: (context) => {
    const { settings, idp, shared, recordRefresh } = context;
    const { store, clock, logger, vault, signIn, publicUrl } = shared;
    const provider = oauthProvider(settings.provider, idp.requestTimeoutMs);
    const configuration = provider.configuration;
    const source = new RefreshingCredentialSource({
      provider: provider.name,
      vault,
      locks: store,
      clock,
      logger,
      refresh: async (refreshToken) =>
        tokensOf(await oidc.refreshTokenGrant(await configuration(), refreshToken), clock.now(), refreshToken),
      isUnavailable: providerUnavailable,
      onRefresh: recordRefresh,
    });
    const sessions = new AccountSessions({ store, clock, publicUrl }, signIn);
    return { provider, source, sessions, what: `connect your ${provider.label} account` };
  },
};

const SIGN_IN_AGAIN = 'sign in again at your identity provider';

/** The kept upstream credentials, when a mode keeps any (the key was checked with the configuration). */
export function credentialVault(
  settings: Settings,
  shared: Pick<UpstreamCredentialsShared, 'store' | 'clock' | 'logger'>,
): CredentialVault | undefined {
  const cipher = configuredCipher(settings);
  return cipher === undefined ? undefined : new CredentialVault({ ...shared, cipher });
}

/**
 * Upstream credentials in the configured mode, or undefined when the mode keeps none (the key was
 * checked with the configuration).
 */
export function upstreamCredentials(
  settings: Settings,
  idp: IdpSettings,
  shared: UpstreamCredentialsShared,
): UpstreamCredentials | undefined {
  const build = MODES[settings.mode];
  const { vault } = shared;
  if (build === undefined || vault === undefined) return undefined;
  const { store, clock, logger, audit, metrics, publicUrl } = shared;
  const issuer = idp.issuer ?? '';
  const credentialKey = parseCredentialKey(settings.key!) as Buffer;
  const links = new ConnectLinks(
    credentialKey,
    clock,
    store,
    issuer,
    identityProviders(idp).map((p) => p.issuer),
  );
  const idpConfiguration = providerConfiguration({
    issuer: idp.issuer,
    clientId: idp.clientId ?? '',
    clientSecret: idp.clientSecret,
    timeoutMs: idp.requestTimeoutMs,
  });
  const recordRefresh = refreshRecorder({ metrics, audit });
  const { provider, source, keepIdpTokens, sessions, what } = build({
    settings,
    idp,
    shared: { ...shared, vault },
    issuer,
    idpConfiguration,
    recordRefresh,
  });
  const delivery = new UpstreamCredentialDelivery({ header: settings.header, serviceToken: settings.serviceToken, issuer, source });
  const flow = new ConnectFlow({
    links,
    vault,
    provider,
    issuer,
    credentialKey,
    used: store,
    clock,
    logger,
    publicUrl,
    ...(sessions !== undefined ? { sessions } : {}),
    clientName: async (clientId) => clientName(await store.getClient(clientId)),
    onConnected: (subject, name) => {
      metrics.upstreamCredentialsConnected.inc();
      return audit.record({ who: 'user', action: CREDENTIAL_ACTIONS.connected, result: 'ok', subject, detail: { provider: name } });
    },
  });
  const routes: Route[] = [
    { path: '/connect/callback', methods: ['GET'], handler: (req, res, path) => flow.handle(req, res, path) },
    { path: '/connect/*', methods: ['GET', 'POST'], handler: (req, res, path) => flow.handle(req, res, path) },
  ];
  return { delivery, links, what, keepIdpTokens, routes };
}

/** Modes idp and token-exchange connect at the IdP itself: the connect round trip is a sign-in there. */
function idpProvider({ idp, idpConfiguration }: ModeContext): ConnectProvider {
  return {
    name: 'idp',
    label: 'your identity provider',
    scopes: idp.scopes,
    openid: true,
    sameSubject: true,
    configuration: idpConfiguration,
  };
}

/** The user's IdP tokens, renewed by signing in at the IdP again. */
function idpTokenSource({ shared, recordRefresh }: ModeContext): RefreshingCredentialSource {
  const { vault, store, clock, logger, signIn } = shared;
  return new RefreshingCredentialSource({
    provider: 'idp',
    vault,
    locks: store,
    clock,
    logger,
    refresh: (refreshToken) => (signIn === undefined ? Promise.reject(new Error('browser sign-in is off')) : signIn.refresh(refreshToken)),
    isUnavailable: (err) => err instanceof IdpUnavailable,
    onRefresh: recordRefresh,
  });
}

/** Browser sign-in keeps the IdP's tokens, which modes idp and token-exchange deliver or exchange. */
function keepIdpTokensOf({ shared, issuer }: ModeContext): UpstreamCredentials['keepIdpTokens'] {
  const { vault } = shared;
  return (user, tokens) => vault.save({ subject: user.subject, issuer, provider: 'idp' }, tokens);
}

/** Mode oauth's provider: its record name and label, whether it speaks OpenID, and its configuration. */
function oauthProvider(settings: Settings['provider'], timeoutMs: number): ConnectProvider {
  // A provider without discovery states no client authentication method: its secret goes in the form
  // (client_secret_post), as GitHub documents for its token endpoint; a discovered one gets HTTP Basic.
  const configuration = providerConfiguration({
    ...settings,
    clientId: settings.clientId!,
    secretInForm: settings.issuer === undefined,
    timeoutMs,
  });
  const host = new URL(settings.issuer ?? settings.tokenEndpoint!).host;
  // An OpenID provider (found by discovery from `issuer`, or asked for `openid`) is asked for `openid`,
  // gets a nonce and must answer with an ID token (OpenID Connect Core 1.0 §3.1.2.1: no ID token is
  // issued unless `openid` is asked for); a plain OAuth 2.0 provider given by its two endpoints
  // (GitHub's shape) gets neither.
  const asked = (settings.scopes ?? '').split(' ').filter((scope) => scope !== '');
  const openid = settings.issuer !== undefined || asked.includes('openid');
  return {
    name: `oauth:${host}`,
    label: settings.name ?? host,
    scopes: openid && !asked.includes('openid') ? ['openid', ...asked].join(' ') : settings.scopes,
    openid,
    sameSubject: false,
    configuration,
  };
}
