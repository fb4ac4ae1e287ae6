// The directory's word at sign-in: a person the directory (SCIM) made inactive or deleted is refused
// by every door that turns an IdP identity into access (browser sign-in, the device page, the account
// page, token exchange, ID-JAG) until the directory makes them active again.
//
// Race-free with a deactivation without a cross-key script: a door records who signed in (with
// `scim.match: email`, the identity under its email) and writes what it issues before it reads the
// directory; a deactivation writes the directory before it reads those identities and revokes what
// they hold. Either the door reads the person inactive, or the deactivation finds what it issued.

import { issuerOfProvider } from './providers.ts';
import type { Config } from '../config/load.ts';
import type { Clock } from '../model/clock.ts';
import { directoryRefuses, userNameKey } from '../model/directory.ts';
import type { DirectoryStorage } from '../store/types.ts';

/** Who a door is admitting: the IdP subject and issuer, and the email when the IdP verified it. */
export interface DirectoryIdentity {
  subject: string;
  issuer: string;
  email?: string | undefined;
}

export interface DirectoryGate {
  /** Records the identity (for `scim.match: email`), then whether the directory refuses it. */
  refuses(identity: DirectoryIdentity): Promise<boolean>;
}

/** What the person is told, on a page or in an error description. */
export const DEACTIVATED_TEXT =
  'This account has been deactivated by your organisation’s directory. Ask your administrator to reactivate it.';
export const DEACTIVATED_DESCRIPTION = 'the account is deactivated by the directory';

/** The gate, when SCIM is on (`SCIM_TOKEN` set); undefined otherwise (nothing is read or written). */
export function directoryGateFor(config: Config, store: DirectoryStorage, clock: Clock): DirectoryGate | undefined {
  if (config.scim.token === '') return undefined;
  const { match, provider } = config.scim;
  const issuer = issuerOfProvider(config.idp, provider);
  return {
    async refuses(identity) {
      // The directory provisions the people of its provider only.
      if (identity.issuer !== issuer) return false;
      if (match === 'sub')
        return directoryRefuses(await store.findDirectoryUser(provider, 'userName', identity.subject), 'sub', identity.subject);
      // Only an email the IdP verified names a person of the directory (idp.ts, verifiedEmail).
      if (identity.email === undefined) return false;
      const email = userNameKey(identity.email);
      await store.linkDirectoryIdentity(provider, email, { subject: identity.subject, issuer: identity.issuer }, clock.now());
      return directoryRefuses(await store.findDirectoryUser(provider, 'userName', email), 'email', email);
    },
  };
}
