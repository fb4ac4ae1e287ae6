// Device authorization (RFC 8628), the client's side: POST /device_authorization starts one for a
// client that has no browser of its own (a server, CI, an SSH session). The device code (64 hex) is
// the client's to poll /token with, the user code (8 letters) the user's to type on /device in any
// browser; both are stored only as SHA-256 hashes. Pending authorizations are bounded per client
// address and in total. The user's side (the /device page, the IdP, the consent page) is in
// ./authorize.ts; the poll is the device-code grant (./grants/device-code.ts).

import { randomInt } from 'node:crypto';
import { clientActor } from '../observability/audit.ts';
import { generateToken, hashToken } from '../model/credentials.ts';
import { HttpError, invalidClient, tooManyRequests, writeJson } from '../http/errors.ts';
import { GRANT_DEVICE_CODE } from '../model/grant-types.ts';
import { limitKey } from '../model/net-address.ts';
import type { ClientRecord } from '../model/records.ts';
import { splitScopes } from '../model/clients.ts';
import { isClientIdMetadataUrl } from './cimd.ts';
import { authenticateClient } from './client-auth.ts';
import { namesThisResource, type FormRequest, type OAuthContext } from './context.ts';
import { grantedScope } from './issuance.ts';

/** RFC 8628 §3.2 `expires_in`: how long the user has to enter the code and approve. */
export const DEVICE_CODE_TTL_MS = 10 * 60 * 1000;
/** RFC 8628 §3.2 `interval`: seconds the client waits between polls (5 is the RFC's default). */
export const DEVICE_POLL_INTERVAL_SECONDS = 5;
/** How long an authorization outlives its expiry, so that a late poll is told `expired_token`. */
export const DEVICE_RETAIN_MS = 10 * 60 * 1000;
/** Pending device authorizations the whole server holds at once (each address holds at most rateLimits.pendingSignInsPerAddress). */
export const MAX_PENDING_DEVICE_AUTHORIZATIONS = 10_000;

/**
 * RFC 8628 §6.1: consonants only, no vowels (no words spelled by accident) and none that read alike
 * (no 0/O, 1/I/L confusion: digits and vowels are left out). 20^8 ≈ 2.6·10^10 codes.
 */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
export const USER_CODE_LENGTH = 8;

/** A fresh user code, as shown: `XXXX-XXXX`. */
export function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/**
 * A typed user code in its stored form (upper case, without dashes and spaces), or undefined when it
 * cannot be one (wrong length, or a letter outside the alphabet): such an entry is a failed one.
 */
export function normaliseUserCode(typed: string): string | undefined {
  if (typed.length > 64) return undefined;
  const code = typed.toUpperCase().replace(/[\s-]/g, '');
  if (code.length !== USER_CODE_LENGTH) return undefined;
  for (const c of code) if (!USER_CODE_ALPHABET.includes(c)) return undefined;
  return code;
}

/**
 * The client of a device authorization request: authenticated as at /token, or a metadata-document
 * client (its URL as client_id) that has no record here yet, whose document lists the device grant
 * and asks for no client authentication (a record is made when the user approves, as for a code).
 */
async function deviceClient(ctx: OAuthContext, request: FormRequest): Promise<ClientRecord> {
  const { presented } = request;
  const id = presented.formClientId;
  if (
    ctx.cimd &&
    id !== undefined &&
    isClientIdMetadataUrl(id) &&
    !presented.basic &&
    presented.assertion === undefined &&
    (await ctx.store.getClient(id)) === null
  ) {
    if (presented.formClientSecret !== undefined) throw invalidClient(false);
    const doc = await ctx.cimd.resolve(id, request.fetches);
    if (doc.tokenEndpointAuthMethod !== 'none')
      throw new HttpError('invalid_client', 'this application authenticates with a key: start with browser sign-in first', { status: 400 });
    if (!doc.grantTypes.includes(GRANT_DEVICE_CODE))
      throw new HttpError('unauthorized_client', "the application's metadata document does not list the device_code grant");
    const client: ClientRecord = {
      clientId: id,
      redirectUris: doc.redirectUris,
      grantTypes: doc.grantTypes,
      profile: 'interactive',
      tokenEndpointAuthMethod: 'none',
      source: 'cimd',
      createdAt: ctx.clock.now(),
    };
    if (doc.scope !== undefined) client.scope = doc.scope;
    return client;
  }
  const authenticated = await authenticateClient(presented, ctx, request.fetches ? { fetches: request.fetches } : {});
  if (!authenticated) throw invalidClient(false);
  if (!authenticated.client.grantTypes.includes(GRANT_DEVICE_CODE))
    throw new HttpError('unauthorized_client', 'this client may not use the device_code grant');
  return authenticated.client;
}

/** POST /device_authorization (RFC 8628 §3.1, §3.2). */
export async function handleDeviceAuthorization(ctx: OAuthContext, request: FormRequest): Promise<void> {
  const { form, res } = request;
  // Counted as the other per-address limits are: an IPv6 client as its network.
  const address = limitKey(ctx.addresses.client(request.req), ctx.config.rateLimits.ipv6PrefixLength);
  const resource = form.get('resource');
  if (resource !== undefined && !namesThisResource(ctx, resource))
    throw new HttpError('invalid_target', `tokens of this server are only issued for ${ctx.publicUrl()}/mcp`);
  const client = await deviceClient(ctx, request);
  // As at /authorize: within the client's scope, and only scopes this server defines are granted.
  const asked = grantedScope(form.get('scope'), client.scope);
  const { granted } = splitScopes(asked, ctx.config.policy.rules?.scopes ?? []);
  const now = ctx.clock.now();
  const deviceCode = generateToken();
  for (let attempt = 0; attempt < 3; attempt++) {
    const userCode = newUserCode();
    const outcome = await ctx.store.putDeviceAuthorization(
      {
        deviceCodeHash: hashToken(deviceCode),
        userCodeHash: hashToken(normaliseUserCode(userCode)!),
        clientId: client.clientId,
        ...(granted !== undefined ? { scope: granted } : {}),
        interval: DEVICE_POLL_INTERVAL_SECONDS,
        createdAt: now,
        expiresAt: now + DEVICE_CODE_TTL_MS,
      },
      DEVICE_RETAIN_MS,
      { address, perAddress: ctx.config.rateLimits.pendingSignInsPerAddress, total: MAX_PENDING_DEVICE_AUTHORIZATIONS, now },
    );
    if (!outcome.stored && outcome.holder === 'user_code') continue;
    if (!outcome.stored) {
      const holder = outcome.holder === 'address' ? 'this address has' : 'this server has';
      throw tooManyRequests(
        Math.ceil((outcome.retryAt - now) / 1000),
        `${holder} too many device sign-ins in progress; finish one or try again later`,
      );
    }
    await ctx.audit.record({ who: clientActor(client.clientId), action: 'device_authorization', result: 'ok', clientId: client.clientId });
    const verificationUri = `${ctx.publicUrl()}/device`;
    writeJson(
      res,
      200,
      {
        device_code: deviceCode,
        user_code: userCode,
        verification_uri: verificationUri,
        verification_uri_complete: `${verificationUri}?user_code=${userCode}`,
        expires_in: DEVICE_CODE_TTL_MS / 1000,
        interval: DEVICE_POLL_INTERVAL_SECONDS,
      },
      { 'cache-control': 'no-store', pragma: 'no-cache' },
    );
    return;
  }
  // Three draws that each met a waiting code: the server holds far too many, or the generator is broken.
  throw new HttpError('temporarily_unavailable', 'no free user code could be drawn; try again', { headers: { 'retry-after': '5' } });
}
