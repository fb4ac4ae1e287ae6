// The identity providers the sidecar trusts, resolved once from the configuration: the IDP_* one (named
// `default`) and those of `idp.providers`, each with the `idp` section's settings completed by its own
// issuer, client, audience, keys and claim rules. Every verifier and sign-in is built per provider.

import type { Config } from '../config/load.ts';
import { DEFAULT_PROVIDER_NAME } from '../config/keys/idp-providers.ts';

/** One provider's settings: the `idp` section's shape (what the verifiers read), with its name and domains. */
export type ProviderSettings = Config['idp'] & {
  readonly name: string;
  readonly issuer: string;
  /** E-mail domains whose people sign in here (home-realm discovery), lowercase. */
  readonly domains: readonly string[];
};

const resolved = new WeakMap<Config['idp'], readonly ProviderSettings[]>();

/** Every configured provider, the IDP_* one first; the same objects at each call (the key sets are cached per provider). */
export function identityProviders(idp: Config['idp']): readonly ProviderSettings[] {
  const known = resolved.get(idp);
  if (known) return known;
  const out: ProviderSettings[] = [];
  if (idp.issuer !== undefined) out.push(Object.freeze({ ...idp, name: DEFAULT_PROVIDER_NAME, issuer: idp.issuer, domains: [] }));
  for (const entry of idp.providers ?? []) {
    const { claims = {} } = entry;
    out.push(
      Object.freeze({
        ...idp,
        ...claims,
        name: entry.name,
        issuer: entry.issuer,
        clientId: entry.clientId,
        clientSecret: entry.clientSecret,
        audience: entry.audience,
        jwksUrl: entry.jwksUrl,
        domains: entry.domains,
      }),
    );
  }
  const frozen = Object.freeze(out);
  resolved.set(idp, frozen);
  return frozen;
}

/** The issuer of the provider named `name` (e.g. `scim.provider`), if one is configured. */
export function issuerOfProvider(idp: Config['idp'], name: string): string | undefined {
  return identityProviders(idp).find((p) => p.name === name)?.issuer;
}

/** Whether more than one provider is configured: the person's issuer must then be named where a subject is. */
export function severalProviders(idp: Config['idp']): boolean {
  return identityProviders(idp).length > 1;
}

/** The provider whose `domains` holds the domain of `email`, if any (home-realm discovery). */
export function providerForEmail(providers: readonly { name: string; domains: readonly string[] }[], email: string): string | undefined {
  const at = email.lastIndexOf('@');
  if (at < 1) return undefined;
  const domain = email.slice(at + 1).toLowerCase();
  return providers.find((p) => p.domains.includes(domain))?.name;
}
