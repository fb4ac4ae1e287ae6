// Revocation notices over Redis pub/sub: every sidecar sharing the backend hears every revocation
// (to end its open streams). A notice carries identifiers only; anything else on the channel, which
// any Redis client may publish to, is ignored.

import { connectRedis, duplicateConnection, type RedisClient } from './redis-connection.ts';
import type { RevocationListener, RevocationNotice } from './types.ts';

/**
 * Subscribes `listener` to `channel` on a connection of its own in subscriber mode. It reconnects as
 * the main one does; after a reconnect it subscribes again and only then reports `missed`, so a
 * revocation is either delivered or already written when the listener re-checks. Resolves with the
 * function that ends the subscription.
 */
export async function subscribeNotices(
  redis: RedisClient,
  channel: string,
  listener: RevocationListener,
  connectTimeoutMs: number,
): Promise<() => Promise<void>> {
  const sub = duplicateForSubscription(redis);
  let subscribedBefore = false;
  let closing = false;
  sub.on('error', () => undefined); // the main connection reports outages; this one just reconnects
  sub.on('message', (from: string, text: string) => {
    if (from !== channel) return;
    const notice = parseNotice(text);
    if (notice) listener.revoked(notice);
  });
  const subscribe = async (): Promise<void> => {
    await sub.subscribe(channel);
    if (subscribedBefore) listener.missed();
    subscribedBefore = true;
  };
  sub.on('ready', () => {
    // The first subscription is awaited below; a failed one here waits for the next 'ready'.
    if (subscribedBefore && !closing) subscribe().catch(() => undefined);
  });
  await connectRedis(sub, connectTimeoutMs);
  try {
    await subscribe();
  } catch (err) {
    sub.disconnect();
    throw err;
  }
  return async () => {
    closing = true;
    await sub.quit().catch(() => sub.disconnect());
  };
}

/**
 * Tells every subscribed sidecar what was revoked. The revocation itself is already stored: a lost
 * notice only delays the end of open streams to the listeners' next re-check, so it fails nothing.
 */
export async function publishNotice(redis: RedisClient, channel: string, notice: RevocationNotice): Promise<void> {
  await redis.publish(channel, JSON.stringify(notice)).catch(() => undefined);
}

/** The subscriber connection: re-subscribed by subscribeNotices itself (to know when it is done). */
function duplicateForSubscription(redis: RedisClient): RedisClient {
  return duplicateConnection(redis, { autoResubscribe: false });
}

const NOTICE_ID = /^[0-9A-Za-z_-]{1,128}$/;

/** A notice from the channel, or null: anything not shaped as one is ignored. */
function parseNotice(text: string): RevocationNotice | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (raw === null || typeof raw !== 'object') return null;
  const notice: RevocationNotice = {};
  for (const field of ['tokenHashes', 'clientIds', 'familyIds'] as const) {
    const list = (raw as Record<string, unknown>)[field];
    if (list === undefined) continue;
    if (!Array.isArray(list) || !list.every((v) => typeof v === 'string' && NOTICE_ID.test(v))) return null;
    notice[field] = list as string[];
  }
  return notice;
}
