// The identity provider checked before the sidecar serves: its discovery document, its keys and the
// sidecar's client credentials at its token endpoint, so that a mistyped issuer or a wrong secret is
// an operator's start-up error naming the URL tried, not the first user's failed sign-in.

import type { Config } from '../config/load.ts';
import { createIdpSignIn, fetchJwks, IdpSetupProblem } from './oidc-client.ts';

/** Whether a rule needs the IdP's groups claim: `idp.requiredGroup`, or a policy rule naming groups. */
export function groupRulesConfigured(config: Config): boolean {
  return config.idp.requiredGroup !== undefined || (config.policy.rules?.rules.some((r) => r.groups !== undefined) ?? false);
}

/** Every problem found with the configured IdP, one sentence each; empty when it is usable (or not configured). */
export async function checkIdentityProvider(config: Config): Promise<string[]> {
  const problems: string[] = [];
  const callbackUrl = `${config.proxy.publicUrl ?? `http://localhost:${config.proxy.port}`}/oauth/callback`;
  const signIn = createIdpSignIn(config.idp, () => callbackUrl);
  if (signIn) {
    try {
      await signIn.check();
    } catch (err) {
      if (!(err instanceof IdpSetupProblem)) throw err;
      problems.push(err.message);
    }
  }
  // The token exchange and identity assertion grants verify JWTs against IDP_JWKS_URL, which need not be the discovered one.
  const { jwksUrl } = config.idp;
  if (jwksUrl !== undefined && (config.idp.audience !== undefined || config.idp.idJag)) {
    try {
      await fetchJwks(jwksUrl, config.idp.jwksTimeoutMs);
    } catch (err) {
      problems.push(`cannot read the identity provider's keys at ${jwksUrl} (IDP_JWKS_URL): ${(err as Error).message}`);
    }
  }
  return problems;
}
