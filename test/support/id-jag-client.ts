// An MCP client doing Enterprise-Managed Authorization end to end, written against the extension's text
// (modelcontextprotocol/ext-auth, specification/stable/enterprise-managed-authorization.mdx, §3 to §6)
// and draft-ietf-oauth-identity-assertion-authz-grant §4.3/§4.4. The Python MCP SDK ships such a client,
// but only npm and Debian packages can be installed here, so its steps are written out:
//  1. discovery: the MCP server's protected-resource metadata (RFC 9728) names the authorization server,
//     whose metadata (RFC 8414) must list the id-jag grant profile and gives the token endpoint;
//  2. single sign-on at the IdP: an ID token (the test IdP's password grant stands in for the browser);
//  3. token exchange at the IdP (RFC 8693): the ID token for an ID-JAG, audience the authorization
//     server's issuer, resource the MCP server's resource identifier;
//  4. the ID-JAG at the authorization server's token endpoint (RFC 7523 jwt-bearer), with the client's
//     own credentials there (client_secret_basic);
//  5. the access token on /mcp with the official MCP TypeScript SDK client.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { TOKEN_EXCHANGE, TOKEN_TYPE_ID_JAG, TOKEN_TYPE_ID_TOKEN } from './test-idp.ts';

export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
export const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';

export interface IdJagClientOptions {
  /** The MCP server (behind the sidecar), e.g. http://127.0.0.1:1234/mcp. */
  mcpUrl: string;
  /** The IdP's token endpoint and this client's credentials there. */
  idpTokenUrl: string;
  idpClient: { id: string; secret: string };
  /** The user signing in at the IdP. */
  user: { name: string; password: string };
  /** This client's credentials at the MCP server's authorization server (an admin-created confidential client). */
  asClient: { id: string; secret: string };
  scope?: string;
}

const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

async function json(res: Response, step: string): Promise<Record<string, any>> {
  const body = (await res.json()) as Record<string, any>;
  if (!res.ok) throw new Error(`${step}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

function form(url: string, params: Record<string, string | undefined>, authorization: string): Promise<Response> {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) body.set(k, v);
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization }, body });
}

export interface Discovered {
  resource: string;
  issuer: string;
  tokenEndpoint: string;
}

/** Step 1: the protected resource's metadata, then its authorization server's; the id-jag profile must be listed. */
export async function discover(mcpUrl: string): Promise<Discovered> {
  const url = new URL(mcpUrl);
  const prm = await json(await fetch(new URL(`/.well-known/oauth-protected-resource${url.pathname}`, url)), 'protected resource metadata');
  const issuer = prm.authorization_servers[0] as string;
  const asm = await json(await fetch(`${issuer}/.well-known/oauth-authorization-server`), 'authorization server metadata');
  if (asm.issuer !== issuer) throw new Error('authorization server metadata: issuer mismatch');
  if (!asm.grant_types_supported?.includes(JWT_BEARER) || !asm.authorization_grant_profiles_supported?.includes(ID_JAG_PROFILE)) {
    throw new Error('the authorization server does not support enterprise-managed authorization');
  }
  return { resource: prm.resource as string, issuer, tokenEndpoint: asm.token_endpoint as string };
}

/** Steps 2 and 3: an ID token from the IdP, exchanged there for an ID-JAG for `discovered`. */
export async function obtainIdJag(options: IdJagClientOptions, discovered: Discovered): Promise<string> {
  const auth = basic(options.idpClient.id, options.idpClient.secret);
  const signIn = await json(
    await form(
      options.idpTokenUrl,
      { grant_type: 'password', username: options.user.name, password: options.user.password, scope: 'openid' },
      auth,
    ),
    'IdP sign-in',
  );
  const exchanged = await json(
    await form(
      options.idpTokenUrl,
      {
        grant_type: TOKEN_EXCHANGE,
        requested_token_type: TOKEN_TYPE_ID_JAG,
        audience: discovered.issuer,
        resource: discovered.resource,
        scope: options.scope,
        subject_token: signIn.id_token as string,
        subject_token_type: TOKEN_TYPE_ID_TOKEN,
      },
      auth,
    ),
    'IdP token exchange',
  );
  if (exchanged.issued_token_type !== TOKEN_TYPE_ID_JAG) throw new Error(`IdP token exchange: issued ${exchanged.issued_token_type}`);
  return exchanged.access_token as string;
}

/** Step 4: the ID-JAG at the authorization server's token endpoint; the raw response. */
export function presentIdJag(tokenEndpoint: string, asClient: { id: string; secret: string }, idJag: string): Promise<Response> {
  return form(tokenEndpoint, { grant_type: JWT_BEARER, assertion: idJag }, basic(asClient.id, asClient.secret));
}

/** Step 5: an MCP SDK client connected to `mcpUrl` with the access token. */
export async function connectWithToken(mcpUrl: string, accessToken: string): Promise<Client> {
  const client = new Client({ name: 'id-jag-test-client', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${accessToken}` } } }),
  );
  return client;
}

/** The whole flow: the token response of step 4 and a connected MCP client. */
export async function runIdJagFlow(options: IdJagClientOptions): Promise<{ idJag: string; token: Record<string, any>; client: Client }> {
  const discovered = await discover(options.mcpUrl);
  const idJag = await obtainIdJag(options, discovered);
  const token = await json(await presentIdJag(discovered.tokenEndpoint, options.asClient, idJag), 'ID-JAG at the authorization server');
  return { idJag, token, client: await connectWithToken(options.mcpUrl, token.access_token as string) };
}
