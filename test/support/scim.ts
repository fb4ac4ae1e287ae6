// A SCIM client for the tests: requests to the admin listener's /scim/v2 as a directory sends them.

export interface ScimAnswer {
  status: number;
  body: any;
  headers: Headers;
}

/** One SCIM request; `body` is sent as application/scim+json (or `contentType`), raw when a string. */
export async function scimRequest(
  adminUrl: string,
  token: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/scim+json',
): Promise<ScimAnswer> {
  const headers: Record<string, string> = { accept: 'application/scim+json' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = contentType;
  const res = await fetch(`${adminUrl}/scim/v2${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** A directory bound to one sidecar and token. */
export function directoryClient(adminUrl: string, token: string) {
  return (method: string, path: string, body?: unknown, contentType?: string) =>
    scimRequest(adminUrl, token, method, path, body, contentType);
}

export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
