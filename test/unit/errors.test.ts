// Errors own their status: an error code decides its HTTP status, a contradicting status cannot be
// constructed, and what a listener answers for anything thrown (refusal, store outage, bug) is decided
// by one function.

import { describe, expect, it } from 'vitest';
import { HttpError, httpErrorFor, invalidClient, methodNotAllowed, tooManyRequests, type ErrorCode } from '../../src/http/errors.ts';
import { StoreUnavailableError } from '../../src/store/shared.ts';

describe('HttpError', () => {
  const rows: Array<[ErrorCode, number]> = [
    ['invalid_request', 400],
    ['invalid_grant', 400],
    ['unsupported_grant_type', 400],
    ['invalid_client_metadata', 400],
    ['invalid_token', 401],
    ['invalid_client', 401],
    ['unauthorized', 401],
    ['not_found', 404],
    ['method_not_allowed', 405],
    ['payload_too_large', 413],
    ['too_many_requests', 429],
    ['server_error', 500],
    ['bad_gateway', 502],
    ['temporarily_unavailable', 503],
    ['gateway_timeout', 504],
  ];
  it.each(rows)('%s is answered with %i', (code, status) => {
    expect(new HttpError(code).status).toBe(status);
  });

  it('invalid_client may be answered 400 (RFC 6749 §5.2), which no other code allows', () => {
    expect(new HttpError('invalid_client', 'unknown client', { status: 400 }).status).toBe(400);
    // @ts-expect-error: a status is only accepted for codes that have more than one
    expect(() => new HttpError('invalid_token', undefined, { status: 400 })).toThrow(TypeError);
    expect(() => new HttpError('invalid_client', undefined, { status: 403 as 400 })).toThrow(/never answered with 403/);
  });

  it('factories carry the headers their answers need', () => {
    expect(methodNotAllowed('GET, HEAD').headers).toEqual({ allow: 'GET, HEAD' });
    expect(tooManyRequests(0, 'slow down')).toMatchObject({ status: 429, headers: { 'retry-after': '1' } });
    expect(invalidClient(true).headers?.['www-authenticate']).toMatch(/^Basic /);
    expect(invalidClient(false).headers).toEqual({});
  });
});

describe('httpErrorFor', () => {
  it('passes a decided answer through as it is', () => {
    const refusal = new HttpError('invalid_grant', 'no');
    expect(httpErrorFor(refusal)).toBe(refusal);
  });

  it('answers a store that cannot answer with 503 and Retry-After, keeping the cause for the log', () => {
    const cause = new StoreUnavailableError('connection closed');
    const answer = httpErrorFor(cause);
    expect([answer.status, answer.code, answer.headers]).toEqual([503, 'temporarily_unavailable', { 'retry-after': '2' }]);
    expect(answer.cause).toBe(cause);
  });

  it.each([new TypeError('x is undefined'), new RangeError('bad length'), new ReferenceError('y'), new SyntaxError('z')])(
    'answers a programming error (%s) with 500, never as an outage',
    (err) => {
      const answer = httpErrorFor(err);
      expect([answer.status, answer.code, answer.description]).toEqual([500, 'server_error', undefined]);
    },
  );

  it('answers a thrown non-Error with 500', () => {
    expect(httpErrorFor('oops').status).toBe(500);
  });
});
