// The directory's key names under the prefix (docs/storage.md lists them).

/** The directory's keys: one `{directory}` slot, so a change and its indexes are one transaction. */
export function directoryKeys(prefix: string) {
  return {
    /** A SCIM user of the directory, by its id: directoryUserFields. One `{directory}` slot: a change and its indexes are one transaction. */
    directoryUser: (id: string) => `${prefix}{directory}:scimUsers:${id}`,
    /** One index entry of the directory's users (directoryIndexName): field `id`. */
    directoryIndex: (name: string) => `${prefix}{directory}:scimIndex:${name}`,
    /** The live users of one provider (SHA-256 hex of its name): a sorted set, member = id, score = createdAt. */
    directoryList: (providerHash: string) => `${prefix}{directory}:scimList:${providerHash}`,
    /** The identities seen signing in with one email (directoryLinkName): field JSON [subject, issuer] -> epoch ms. */
    directoryLinks: (name: string) => `${prefix}{directory}:scimLinks:${name}`,
  };
}
