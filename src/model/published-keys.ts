// The public assertion keys every replica lists in one shared hash (a field per kid), as a pure step
// on what is listed: both stores run it under their one compare-and-set on the hash (updateHash in
// src/store/), so the rule is written once.

/** One listed key as read: its kid and when its listing ends (undefined: the entry does not read). */
export interface ListedKey {
  kid: string;
  expiresAt: number | undefined;
}

/** What a publish changes: whether the key is written, the entries forgotten, and when the hash ends (undefined: with them). */
export interface PublishChange {
  write: boolean;
  forget: string[];
  until: number | undefined;
}

/**
 * Publishing key `kid` until `expiresAt` at `now`: it is listed until then, extending and never
 * shortening its listing; every entry expired by `now` (or unreadable) is forgotten, and the hash
 * lasts as long as its longest listing, so the keys of replicas that died leave nothing behind.
 */
export function publishKey(listed: readonly ListedKey[], kid: string, expiresAt: number, now: number): PublishChange {
  const current = listed.find((k) => k.kid === kid);
  const write = current?.expiresAt === undefined || current.expiresAt < expiresAt;
  const after = [...listed.filter((k) => k.kid !== kid), { kid, expiresAt: write ? expiresAt : current.expiresAt }];
  const forget: string[] = [];
  let until: number | undefined;
  for (const k of after) {
    if (k.expiresAt === undefined || k.expiresAt <= now) forget.push(k.kid);
    else until = Math.max(until ?? 0, k.expiresAt);
  }
  return { write, forget, until };
}
