// The grants of the token endpoint, one line each: the token endpoint dispatches on this list, the
// discovery document's `grant_types_supported` lists the enabled ones, client provisioning accepts
// their names, and the audit names refusals after them.

import { authorizationCodeGrant } from './authorization-code.ts';
import { clientCredentialsGrant } from './client-credentials.ts';
import { deviceCodeGrant } from './device-code.ts';
import type { Grant } from './grant.ts';
import { idJagGrant } from './id-jag.ts';
import { refreshTokenGrant } from './refresh-token.ts';
import { tokenExchangeGrant } from './token-exchange.ts';

export const GRANTS: readonly Grant[] = [
  clientCredentialsGrant,
  refreshTokenGrant,
  authorizationCodeGrant,
  deviceCodeGrant,
  tokenExchangeGrant,
  idJagGrant,
];

/** Every grant type a client may be given (whether or not this server's configuration enables it). */
export const GRANT_TYPES: readonly string[] = GRANTS.map((g) => g.grantType);

export function grantNamed(grantType: string): Grant | undefined {
  return GRANTS.find((g) => g.grantType === grantType);
}
