// `--check-config` with upstream credentials on: do the configured keys open what the store holds?
// Each kept record names, in clear, the id of the key it was sealed under; a record whose key id is
// neither UPSTREAM_CREDENTIALS_KEY's nor one of UPSTREAM_CREDENTIALS_PREVIOUS_KEYS' cannot be opened
// (its user is asked to connect again). The check names those key ids with a count of records each:
// never a subject, a ciphertext or a key.

import type { Config } from '../config/load.ts';
import type { UpstreamCredentialStorage } from '../store/types.ts';
import { configuredCipher, type CredentialCipher } from './cipher.ts';

/** Records per key id that `cipher` does not hold, most records first. */
export async function unknownKeyIds(store: Pick<UpstreamCredentialStorage, 'listUpstreamCredentials'>, cipher: CredentialCipher) {
  const counts = new Map<string, number>();
  for (const record of await store.listUpstreamCredentials()) {
    if (!cipher.knows(record.keyId)) counts.set(record.keyId, (counts.get(record.keyId) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}

/**
 * The problem, in one paragraph, when the store holds upstream credentials under key ids the
 * configuration lacks; undefined when every record can be opened (or no mode keeps any: nothing is read).
 */
export async function storedCredentialKeyProblem(
  config: Config,
  openStore: () => Promise<Pick<UpstreamCredentialStorage, 'listUpstreamCredentials'> & { close(): Promise<void> }>,
): Promise<string | undefined> {
  const cipher = configuredCipher(config.upstream.credentials);
  if (cipher === undefined) return undefined;
  const store = await openStore();
  let unknown;
  try {
    unknown = await unknownKeyIds(store, cipher);
  } finally {
    await store.close();
  }
  if (unknown.length === 0) return undefined;
  const total = unknown.reduce((sum, [, n]) => sum + n, 0);
  const list = unknown.map(([id, n]) => `key id ${id}: ${n} record${n === 1 ? '' : 's'}`).join(', ');
  return (
    `the store holds ${total} upstream credential record${total === 1 ? '' : 's'} sealed under key ids the configuration lacks (${list}); ` +
    `the configured UPSTREAM_CREDENTIALS_KEY has key id ${cipher.currentKeyId}. Those records cannot be opened and their users would be asked to connect again. ` +
    'Put the key they were written with in UPSTREAM_CREDENTIALS_KEY or UPSTREAM_CREDENTIALS_PREVIOUS_KEYS (then run reencryptUpstreamCredentials), ' +
    'or delete them if they are to be given up.'
  );
}
