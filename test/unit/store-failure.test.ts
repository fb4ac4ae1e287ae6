// What the Redis store reports as "unavailable" (asStoreFailure, its one choke point): Redis and
// socket failures become StoreUnavailableError with the original as cause; bugs pass as themselves.

import { describe, expect, it } from 'vitest';
import { ReplyError } from 'ioredis';
import { StoreUnavailableError } from '../../src/store/shared.ts';
import { asStoreFailure, RedisConnectError } from '../../src/store/redis-connection.ts';
import { DuplicateRecordError } from '../../src/store/types.ts';

function systemError(type: ErrorConstructor, code: string): Error {
  return Object.assign(new type(`${code} failure`), { code });
}

describe('asStoreFailure', () => {
  it.each([
    ['an error reply (READONLY after a failover)', new ReplyError("READONLY You can't write against a read only replica.")],
    ['a closed connection', new Error('Connection is closed.')],
    ['a command timeout', new Error('Command timed out')],
    ['an unwritable stream (no offline queue)', new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    ['a socket reset', systemError(Error, 'ECONNRESET')],
    [
      'every address refused (AggregateError)',
      Object.assign(new AggregateError([systemError(Error, 'ECONNREFUSED')], 'connect failed'), { code: 'ECONNREFUSED' }),
    ],
  ])('%s is StoreUnavailableError, cause kept', (_, err) => {
    const wrapped = asStoreFailure(err);
    expect(wrapped).toBeInstanceOf(StoreUnavailableError);
    expect((wrapped as Error).cause).toBe(err);
  });

  it.each([
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'clientId')")],
    ['a RangeError', new RangeError('Invalid array length')],
    ["Node's argument error (a TypeError with an ERR_ code)", systemError(TypeError, 'ERR_INVALID_ARG_TYPE')],
    ['a duplicate record', new DuplicateRecordError('client mcp_x already exists')],
    ['a thrown non-Error', 'a string'],
  ])('%s passes unchanged (a bug, not an outage)', (_, err) => {
    expect(asStoreFailure(err)).toBe(err);
  });

  it('an error that already says the store is unavailable is kept as it is', () => {
    const unavailable = new StoreUnavailableError('transaction aborted');
    const connect = new RedisConnectError('refused', 'connect ECONNREFUSED', undefined);
    expect(asStoreFailure(unavailable)).toBe(unavailable);
    expect(asStoreFailure(connect)).toBe(connect);
  });
});
