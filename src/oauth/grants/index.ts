// The grants of the token endpoint, one line each: the token endpoint dispatches on this list, the
// discovery document's `grant_types_supported` lists the enabled ones, client provisioning accepts
// their names, dynamic registration asks each its rule, and the audit names refusals after them.

import { authorizationCodeGrant } from './authorization-code.ts';
import { clientCredentialsGrant } from './client-credentials.ts';
import type { OAuthContext } from '../context.ts';
import type { Grant } from './grant.ts';
import { idJagGrant } from './id-jag.ts';
import { refreshTokenGrant } from './refresh-token.ts';
import { tokenExchangeGrant } from './token-exchange.ts';

export const GRANTS: readonly Grant[] = [
  clientCredentialsGrant,
  refreshTokenGrant,
  authorizationCodeGrant,
  tokenExchangeGrant,
  idJagGrant,
];

/** Every grant type a client may be given (whether or not this server's configuration enables it). */
export const GRANT_TYPES: readonly string[] = GRANTS.map((g) => g.grantType);

export function grantNamed(grantType: string): Grant | undefined {
  return GRANTS.find((g) => g.grantType === grantType);
}

/**
 * Why `POST /register` may not give a client `grantType`, or undefined when it may: a grant only an
 * administrator gives, never (`asked` or a profile's default); or, when `asked`, one this server's
 * configuration does not enable (discovery does not list it, and the client could never use it). A
 * registration that asks for no grant types gets its profile's default whether or not it is enabled,
 * as before: such a client can do nothing with an unused grant, and refusing it would break clients
 * that rely on the default. A name that is no grant here is left to provisioning, which lists the
 * supported ones.
 */
export function registrationRefusal(ctx: OAuthContext, grantType: string, asked: boolean): string | undefined {
  const grant = grantNamed(grantType);
  if (grant === undefined) return undefined;
  if (grant.registration === 'admin') return `${grantType} is only for clients an administrator creates`;
  return !asked || grant.enabled(ctx) ? undefined : grant.disabledDescription;
}
