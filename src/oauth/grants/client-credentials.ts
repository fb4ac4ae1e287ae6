// grant_type=client_credentials (RFC 6749 §4.4): a confidential client an admin created with this
// grant gets an access token for itself, with the lifetime of its profile, plus a rotating refresh
// token when the client also has the refresh_token grant and its profile gives refresh tokens a lifetime.

import { GRANT_CLIENT_CREDENTIALS } from '../../model/grant-types.ts';
import { clientRefused } from '../client-auth.ts';
import { buildPair, grantedScope, issued } from '../issuance.ts';
import { dpopBinding, requireClient, type Grant } from './grant.ts';

const ACTION = 'token.client_credentials';

export const clientCredentialsGrant: Grant = {
  grantType: GRANT_CLIENT_CREDENTIALS,
  action: ACTION,
  enabled: () => true,
  disabledDescription: '',
  // A client that holds it acts as itself with no user: the operator decides who that is.
  registration: 'admin',
  parameters: ['scope'],
  async handle(ctx, request) {
    const { client } = requireClient(request, GRANT_CLIENT_CREDENTIALS, { confidential: 'unauthorized_client' });
    const scope = grantedScope(request.form.get('scope'), client.scope);
    const pair = await buildPair(ctx, client, scope, { dpop: dpopBinding(request) });
    // The client was deleted between its authentication and now.
    if ((await ctx.store.issueTokens(pair.access, pair.refresh)) !== 'ok') throw clientRefused(request.presented);
    return issued(ctx, ACTION, client, pair);
  },
};
