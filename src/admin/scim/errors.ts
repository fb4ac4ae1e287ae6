// SCIM's error answers (RFC 7644 §3.12): `{schemas:[...Error], status:"<code>", scimType?, detail?}` as
// application/scim+json, and every other answer of a SCIM path (a body too large, the store down, a
// wrong method) in the same shape.

import { HttpError, type ErrorCode } from '../../http/errors.ts';

export const SCIM_MEDIA_TYPE = 'application/scim+json';
export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';

/** The scimType values of RFC 7644 §3.12 this server answers with. */
export type ScimType =
  'invalidFilter' | 'tooMany' | 'uniqueness' | 'mutability' | 'invalidSyntax' | 'invalidPath' | 'noTarget' | 'invalidValue';

const CODE_OF_STATUS: Readonly<Record<number, ErrorCode>> = {
  400: 'invalid_request',
  401: 'unauthorized',
  404: 'not_found',
  409: 'conflict',
};

/** A SCIM error: 400 (with a scimType), 401, 404 or 409 (uniqueness). `detail` is public: never a value the caller sent. */
export function scimError(status: 400 | 401 | 404 | 409, detail: string, scimType?: ScimType): HttpError {
  return new HttpError(CODE_OF_STATUS[status]!, detail, {
    body: scimErrorBody(status, detail, scimType),
    headers: { 'content-type': SCIM_MEDIA_TYPE },
  });
}

function scimErrorBody(status: number, detail: string | undefined, scimType?: ScimType): string {
  return JSON.stringify({
    schemas: [ERROR_SCHEMA],
    status: String(status),
    ...(scimType === undefined ? {} : { scimType }),
    ...(detail === undefined ? {} : { detail }),
  });
}

/**
 * Any answer of a SCIM path in SCIM's error shape, with its status and headers (Allow, Retry-After)
 * kept (the codes answered on SCIM paths all have the status STATUS gives them).
 */
export function asScimError(answer: HttpError): HttpError {
  if (answer.body !== undefined) return answer;
  return new HttpError(answer.code, answer.description, {
    body: scimErrorBody(answer.status, answer.description),
    headers: { ...answer.headers, 'content-type': SCIM_MEDIA_TYPE },
    cause: answer.cause,
  });
}

/** A refusal of the request's syntax (400 invalidSyntax). */
export const invalidSyntax = (detail: string): HttpError => scimError(400, detail, 'invalidSyntax');
/** A refusal of a value (400 invalidValue). */
export const invalidValue = (detail: string): HttpError => scimError(400, detail, 'invalidValue');
