// The device flow (RFC 8628) as a client and a user take it: the client's POST /device_authorization
// and polls (the shape of RFC 8628 §3.1 and §3.4: form bodies, client_id for a public client), and
// the user's code entry on /device with a cookie-keeping user agent.

import { UserAgent, consentRequestId, type Hop } from './user-agent.ts';
import { tokenRequest } from './sign-in.ts';

export const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

export async function deviceAuthorizationRequest(
  base: string,
  params: Record<string, string>,
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/device_authorization`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : { text },
  };
}

export async function startDevice(base: string, clientId: string, extra: Record<string, string> = {}): Promise<DeviceAuthorization> {
  const res = await deviceAuthorizationRequest(base, { client_id: clientId, ...extra });
  if (res.status !== 200) throw new Error(`device_authorization: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as unknown as DeviceAuthorization;
}

export function poll(base: string, clientId: string, deviceCode: string) {
  return tokenRequest(base, { grant_type: DEVICE_GRANT, client_id: clientId, device_code: deviceCode });
}

/** POST /register of a public client with the device grant and no redirect URI (a CLI agent). */
export async function registerDeviceClient(base: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${base}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Headless agent',
      grant_types: [DEVICE_GRANT, 'refresh_token'],
      token_endpoint_auth_method: 'none',
      ...extra,
    }),
  });
  const body = (await res.json()) as { client_id?: string };
  if (res.status !== 201 || !body.client_id) throw new Error(`register: ${res.status} ${JSON.stringify(body)}`);
  return body.client_id;
}

/** The user types `userCode` on /device: the consent page (or the answer that refused the code). */
export function enterCode(agent: UserAgent, base: string, userCode: string): Promise<Hop> {
  return agent.request(`${base}/device`, { form: { user_code: userCode } });
}

/** Consent page -> `decision` -> (approve) the IdP with auto-login -> the sidecar's final page. */
export async function decide(agent: UserAgent, base: string, consent: Hop, decision: 'approve' | 'deny'): Promise<Hop> {
  const answered = await agent.request(`${base}/authorize/consent`, { form: { request: consentRequestId(consent.body), decision } });
  return agent.follow(answered);
}
