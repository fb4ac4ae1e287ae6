// The identity provider checked before the sidecar serves: its discovery document, its keys and the
// sidecar's client credentials at its token endpoint, so that a mistyped issuer or a wrong secret is
// an operator's start-up error naming the URL tried, not the first user's failed sign-in.

import type { Config } from '../config/load.ts';
import { createProviderSignIn, fetchJwks, IdpSetupProblem } from './oidc-client.ts';
import { identityProviders, type ProviderSettings } from './providers.ts';

/** Whether a rule needs the IdP's groups claim: `idp.requiredGroup`, or a policy rule naming groups. */
export function groupRulesConfigured(config: Config): boolean {
  return config.idp.requiredGroup !== undefined || (config.policy.rules?.rules.some((r) => r.groups !== undefined) ?? false);
}

/**
 * Every problem found with the configured identity providers, one sentence each (named by provider
 * when there are several); empty when they are usable (or none is configured).
 */
export async function checkIdentityProvider(config: Config): Promise<string[]> {
  const providers = identityProviders(config.idp);
  const problems: string[] = [];
  for (const provider of providers) {
    const found = await checkOneProvider(config, provider);
    problems.push(...(providers.length > 1 ? found.map((p) => `identity provider "${provider.name}": ${p}`) : found));
  }
  return problems;
}

async function checkOneProvider(config: Config, idp: ProviderSettings): Promise<string[]> {
  const problems: string[] = [];
  const callbackUrl = `${config.proxy.publicUrl ?? `http://localhost:${config.proxy.port}`}/oauth/callback`;
  const signIn = createProviderSignIn(idp, () => callbackUrl);
  if (signIn) {
    try {
      await signIn.check();
    } catch (err) {
      if (!(err instanceof IdpSetupProblem)) throw err;
      problems.push(err.message);
    }
  }
  // The token exchange and identity assertion grants verify JWTs against IDP_JWKS_URL, which need not be the discovered one.
  const { jwksUrl } = idp;
  if (jwksUrl !== undefined && (idp.audience !== undefined || idp.idJag)) {
    try {
      await fetchJwks(jwksUrl, idp.jwksTimeoutMs);
    } catch (err) {
      problems.push(`cannot read the identity provider's keys at ${jwksUrl} (IDP_JWKS_URL): ${(err as Error).message}`);
    }
  }
  return problems;
}
