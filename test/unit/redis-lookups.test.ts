// The token lookups' connection is a copy of the main one without what made a lookup expensive:
// ioredis's per-command and per-write timers (bounded by ReadDeadlines instead) and the Lua scripts
// (ioredis copies each script of a connection onto every auto-pipelined batch). No Redis is needed:
// the clients are created, never connected.

import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createRedisClient, duplicateForLookups } from '../../src/store/redis-connection.ts';
import { RedisKeyspace } from '../../src/store/redis-keyspace.ts';

describe('duplicateForLookups', () => {
  it('copies the main connection without its command and socket timeouts and without its scripts', () => {
    const main = createRedisClient({ url: 'redis://127.0.0.1:1/3', commandTimeoutMs: 700, connectTimeoutMs: 900 }) as Redis;
    // A plan of two keys gives the main connection the plan script's command for two keys.
    void new RedisKeyspace(main)
      .apply({
        guards: [],
        steps: [
          ['EXISTS', 'a'],
          ['EXISTS', 'b'],
        ],
      })
      .catch(() => undefined);
    expect(main.options.commandTimeout).toBe(700);
    expect(main.options.socketTimeout).toBeGreaterThan(0);
    expect(Object.keys(main.scriptsSet)).toEqual(['mcpApplyPlan2']);

    const lookups = duplicateForLookups(main) as Redis;
    expect(lookups.options.commandTimeout).toBeUndefined();
    expect(lookups.options.socketTimeout).toBeUndefined();
    expect(Object.keys(lookups.scriptsSet)).toEqual([]);
    // The rest is the main connection's: the same server and database, fail-fast, no offline queue.
    expect(lookups.options.port).toBe(1);
    expect(lookups.options.db).toBe(3);
    expect(lookups.options.enableOfflineQueue).toBe(false);
    expect(lookups.options.connectTimeout).toBe(900);
    main.disconnect();
    lookups.disconnect();
  });

  it('on Cluster, copies the node options without the timeouts', () => {
    const main = createRedisClient({
      url: 'redis+cluster://127.0.0.1:1,127.0.0.1:2',
      commandTimeoutMs: 700,
      connectTimeoutMs: 900,
    }) as Cluster;
    const lookups = duplicateForLookups(main) as Cluster;
    expect(lookups).toBeInstanceOf(Cluster);
    expect(lookups.options.redisOptions?.commandTimeout).toBeUndefined();
    expect(lookups.options.redisOptions?.socketTimeout).toBeUndefined();
    expect(lookups.options.redisOptions?.connectTimeout).toBe(900);
    main.disconnect();
    lookups.disconnect();
  });
});
