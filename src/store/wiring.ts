// Opening the store the configuration names: memory, or Redis connected (and answering) with its
// token lookup cache as configured.

import type { Config } from '../config/load.ts';
import type { Clock } from '../model/clock.ts';
import { describe, type Logger } from '../observability/logger.ts';
import { MemoryTokenStore } from './memory.ts';
import { RedisTokenStore } from './redis.ts';
import { connectRedis, createRedisClient } from './redis-connection.ts';
import { LookupCacheSetupError, type LookupCacheFallback, type LookupCacheOptions } from './redis-lookup-cache.ts';
import type { TokenStore } from './types.ts';

/** Opens the store the config names; a Redis store is connected (and answering) before this resolves. */
export async function openStore(config: Config, clock: Clock, logger: Logger): Promise<TokenStore> {
  if (config.store === 'memory') return new MemoryTokenStore({ clock, keyPrefix: config.redis.keyPrefix });
  const client = createRedisClient({
    url: config.redis.url,
    commandTimeoutMs: config.redis.commandTimeoutMs,
    connectTimeoutMs: config.redis.connectTimeoutMs,
  });
  await connectRedis(client, config.redis.connectTimeoutMs);
  // ioredis reports every failed reconnect attempt; one line per state change is enough for operators.
  let down = false;
  client.on('error', (err: Error) => {
    if (down) return;
    down = true;
    logger.error({ err: describe(err) }, 'redis connection lost: requests are refused with 503 until it is back');
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    logger.info('redis connection restored');
  });
  const store = new RedisTokenStore(client, { keyPrefix: config.redis.keyPrefix, connectTimeoutMs: config.redis.connectTimeoutMs });
  if (config.redis.lookupCache === 'tracking') {
    try {
      await store.trackLookups(lookupCacheOptions(config, logger));
    } catch (err) {
      await store.close();
      throw err;
    }
  } else if (config.redis.lookupCache === 'auto') {
    await cacheWherePossible(store, config, logger);
  }
  return store;
}

/**
 * redis.lookupCache: auto. The cache where the store allows it (standalone, Sentinel, and Cluster with
 * a tracking connection per master); where it does not, the strict mode with one warning and the
 * metric, never a refusal to start: a Redis that refuses to track (an ACL user without CLIENT TRACKING,
 * before 6.0; on Cluster, without CLUSTER MYID, before 7.0). A cache whose own connections cannot be
 * opened within the connect timeout is not waited for either.
 */
export async function cacheWherePossible(store: RedisTokenStore, config: Config, logger: Logger): Promise<void> {
  let reason: LookupCacheFallback;
  try {
    await store.trackLookups(lookupCacheOptions(config, logger));
    return;
  } catch (err) {
    reason = err instanceof LookupCacheSetupError ? 'tracking_refused' : 'setup_failed';
    logger.debug({ err: describe(err) }, 'token lookup cache: set-up failed');
  }
  store.lookupCacheFallback = reason;
  logger.warn(
    { reason },
    reason === 'tracking_refused'
      ? 'token lookup cache off (redis.lookupCache: auto): Redis refused invalidation tracking (an ACL user without CLIENT ID, CLIENT TRACKING, INFO, SUBSCRIBE on __redis__:invalidate, on Cluster CLUSTER SLOTS and CLUSTER MYID, or Redis before 6.0, on Cluster before 7.0); every lookup reads Redis (strict mode)'
      : 'token lookup cache off (redis.lookupCache: auto): its connections could not be set up; every lookup reads Redis (strict mode)',
  );
}

/** The lookup cache's settings from the config (redis.lookupCache: tracking or auto). */
export function lookupCacheOptions(config: Config, logger: Logger): LookupCacheOptions {
  return {
    maxEntries: config.redis.lookupCacheMaxEntries,
    pingIntervalMs: config.redis.lookupCachePingIntervalMs,
    connectTimeoutMs: config.redis.connectTimeoutMs,
    logger,
  };
}
