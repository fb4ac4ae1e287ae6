// A store around another store: each operation of TokenStore delegated by name, through one hook
// (`around`) that a decorator fills in (the Redis store's failure boundary, the metrics' timing). A
// method added to TokenStore does not compile here until it is delegated, so no operation can slip
// past a decorator. `close` and `watch` pass through untouched.

import type { StoreWatch, TokenLookup, TokenStore } from './types.ts';

/** The name of one store operation (what `around` is told, and what metrics label it with). */
export type StoreOperation = Exclude<keyof TokenStore, 'close' | 'watch'>;

type Args<K extends StoreOperation> = Parameters<TokenStore[K]>;

export abstract class StoreDecorator<S extends TokenStore = TokenStore> implements TokenStore {
  protected readonly inner: S;

  constructor(inner: S) {
    this.inner = inner;
  }

  /** Runs one operation of the inner store (`call`), adding what this decorator is for. */
  protected abstract around<T>(operation: StoreOperation, call: () => Promise<T>): Promise<T>;

  get watch(): StoreWatch | undefined {
    return this.inner.watch;
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  // The hot path, one per proxied request: written out (no rest array) for decorators to override.
  lookupToken(tokenHash: string): Promise<TokenLookup> {
    return this.around('lookupToken', () => this.inner.lookupToken(tokenHash));
  }

  putUserToken(...a: Args<'putUserToken'>) {
    return this.around('putUserToken', () => this.inner.putUserToken(...a));
  }
  revokeUserToken(...a: Args<'revokeUserToken'>) {
    return this.around('revokeUserToken', () => this.inner.revokeUserToken(...a));
  }
  createAccessToken(...a: Args<'createAccessToken'>) {
    return this.around('createAccessToken', () => this.inner.createAccessToken(...a));
  }
  revokeAccessToken(...a: Args<'revokeAccessToken'>) {
    return this.around('revokeAccessToken', () => this.inner.revokeAccessToken(...a));
  }
  issueTokens(...a: Args<'issueTokens'>) {
    return this.around('issueTokens', () => this.inner.issueTokens(...a));
  }
  createClient(...a: Args<'createClient'>) {
    return this.around('createClient', () => this.inner.createClient(...a));
  }
  getClient(...a: Args<'getClient'>) {
    return this.around('getClient', () => this.inner.getClient(...a));
  }
  listClients() {
    return this.around('listClients', () => this.inner.listClients());
  }
  deleteClient(...a: Args<'deleteClient'>) {
    return this.around('deleteClient', () => this.inner.deleteClient(...a));
  }
  touchClient(...a: Args<'touchClient'>) {
    return this.around('touchClient', () => this.inner.touchClient(...a));
  }
  readHandle(...a: Args<'readHandle'>) {
    return this.around('readHandle', () => this.inner.readHandle(...a));
  }
  useHandle(...a: Args<'useHandle'>) {
    return this.around('useHandle', () => this.inner.useHandle(...a));
  }
  bindHandle(...a: Args<'bindHandle'>) {
    return this.around('bindHandle', () => this.inner.bindHandle(...a));
  }
  forgetHandle(...a: Args<'forgetHandle'>) {
    return this.around('forgetHandle', () => this.inner.forgetHandle(...a));
  }
  forgetSubjectHandles(...a: Args<'forgetSubjectHandles'>) {
    return this.around('forgetSubjectHandles', () => this.inner.forgetSubjectHandles(...a));
  }
  listSubjectTokens(...a: Args<'listSubjectTokens'>) {
    return this.around('listSubjectTokens', () => this.inner.listSubjectTokens(...a));
  }
  listClientTokens(...a: Args<'listClientTokens'>) {
    return this.around('listClientTokens', () => this.inner.listClientTokens(...a));
  }
  listSubjectConsents(...a: Args<'listSubjectConsents'>) {
    return this.around('listSubjectConsents', () => this.inner.listSubjectConsents(...a));
  }
  revokeSubject(...a: Args<'revokeSubject'>) {
    return this.around('revokeSubject', () => this.inner.revokeSubject(...a));
  }
  rebuildSubjectIndex(...a: Args<'rebuildSubjectIndex'>) {
    return this.around('rebuildSubjectIndex', () => this.inner.rebuildSubjectIndex(...a));
  }
  recordLastUse(...a: Args<'recordLastUse'>) {
    return this.around('recordLastUse', () => this.inner.recordLastUse(...a));
  }
  markSubjectRevoked(...a: Args<'markSubjectRevoked'>) {
    return this.around('markSubjectRevoked', () => this.inner.markSubjectRevoked(...a));
  }
  subjectRevokedAt(...a: Args<'subjectRevokedAt'>) {
    return this.around('subjectRevokedAt', () => this.inner.subjectRevokedAt(...a));
  }
  putAccountSession(...a: Args<'putAccountSession'>) {
    return this.around('putAccountSession', () => this.inner.putAccountSession(...a));
  }
  getAccountSession(...a: Args<'getAccountSession'>) {
    return this.around('getAccountSession', () => this.inner.getAccountSession(...a));
  }
  deleteAccountSession(...a: Args<'deleteAccountSession'>) {
    return this.around('deleteAccountSession', () => this.inner.deleteAccountSession(...a));
  }
  forgetConsent(...a: Args<'forgetConsent'>) {
    return this.around('forgetConsent', () => this.inner.forgetConsent(...a));
  }
  getRefreshToken(...a: Args<'getRefreshToken'>) {
    return this.around('getRefreshToken', () => this.inner.getRefreshToken(...a));
  }
  rotateRefreshToken(...a: Args<'rotateRefreshToken'>) {
    return this.around('rotateRefreshToken', () => this.inner.rotateRefreshToken(...a));
  }
  revokeRefreshFamily(...a: Args<'revokeRefreshFamily'>) {
    return this.around('revokeRefreshFamily', () => this.inner.revokeRefreshFamily(...a));
  }
  putAuthorizationRequest(...a: Args<'putAuthorizationRequest'>) {
    return this.around('putAuthorizationRequest', () => this.inner.putAuthorizationRequest(...a));
  }
  putPendingSignIn(...a: Args<'putPendingSignIn'>) {
    return this.around('putPendingSignIn', () => this.inner.putPendingSignIn(...a));
  }
  takeAuthorizationRequest(...a: Args<'takeAuthorizationRequest'>) {
    return this.around('takeAuthorizationRequest', () => this.inner.takeAuthorizationRequest(...a));
  }
  putAuthorizationCode(...a: Args<'putAuthorizationCode'>) {
    return this.around('putAuthorizationCode', () => this.inner.putAuthorizationCode(...a));
  }
  getAuthorizationCode(...a: Args<'getAuthorizationCode'>) {
    return this.around('getAuthorizationCode', () => this.inner.getAuthorizationCode(...a));
  }
  redeemAuthorizationCode(...a: Args<'redeemAuthorizationCode'>) {
    return this.around('redeemAuthorizationCode', () => this.inner.redeemAuthorizationCode(...a));
  }
  putDeviceAuthorization(...a: Args<'putDeviceAuthorization'>) {
    return this.around('putDeviceAuthorization', () => this.inner.putDeviceAuthorization(...a));
  }
  findDeviceAuthorization(...a: Args<'findDeviceAuthorization'>) {
    return this.around('findDeviceAuthorization', () => this.inner.findDeviceAuthorization(...a));
  }
  decideDeviceAuthorization(...a: Args<'decideDeviceAuthorization'>) {
    return this.around('decideDeviceAuthorization', () => this.inner.decideDeviceAuthorization(...a));
  }
  pollDeviceAuthorization(...a: Args<'pollDeviceAuthorization'>) {
    return this.around('pollDeviceAuthorization', () => this.inner.pollDeviceAuthorization(...a));
  }
  putConsent(...a: Args<'putConsent'>) {
    return this.around('putConsent', () => this.inner.putConsent(...a));
  }
  listConsents(...a: Args<'listConsents'>) {
    return this.around('listConsents', () => this.inner.listConsents(...a));
  }
  linkConsentGrant(...a: Args<'linkConsentGrant'>) {
    return this.around('linkConsentGrant', () => this.inner.linkConsentGrant(...a));
  }
  seedProfiles(...a: Args<'seedProfiles'>) {
    return this.around('seedProfiles', () => this.inner.seedProfiles(...a));
  }
  getProfile(...a: Args<'getProfile'>) {
    return this.around('getProfile', () => this.inner.getProfile(...a));
  }
  getProfileFields(...a: Args<'getProfileFields'>) {
    return this.around('getProfileFields', () => this.inner.getProfileFields(...a));
  }
  listProfiles() {
    return this.around('listProfiles', () => this.inner.listProfiles());
  }
  hitCounter(...a: Args<'hitCounter'>) {
    return this.around('hitCounter', () => this.inner.hitCounter(...a));
  }
  takeQuota(...a: Args<'takeQuota'>) {
    return this.around('takeQuota', () => this.inner.takeQuota(...a));
  }
  useOnce(...a: Args<'useOnce'>) {
    return this.around('useOnce', () => this.inner.useOnce(...a));
  }
  appendAudit(...a: Args<'appendAudit'>) {
    return this.around('appendAudit', () => this.inner.appendAudit(...a));
  }
  listAuditEvents(...a: Args<'listAuditEvents'>) {
    return this.around('listAuditEvents', () => this.inner.listAuditEvents(...a));
  }
  subscribeRevocations(...a: Args<'subscribeRevocations'>) {
    return this.around('subscribeRevocations', () => this.inner.subscribeRevocations(...a));
  }
  putUpstreamCredential(...a: Args<'putUpstreamCredential'>) {
    return this.around('putUpstreamCredential', () => this.inner.putUpstreamCredential(...a));
  }
  getUpstreamCredential(...a: Args<'getUpstreamCredential'>) {
    return this.around('getUpstreamCredential', () => this.inner.getUpstreamCredential(...a));
  }
  replaceUpstreamCredential(...a: Args<'replaceUpstreamCredential'>) {
    return this.around('replaceUpstreamCredential', () => this.inner.replaceUpstreamCredential(...a));
  }
  deleteUpstreamCredentials(...a: Args<'deleteUpstreamCredentials'>) {
    return this.around('deleteUpstreamCredentials', () => this.inner.deleteUpstreamCredentials(...a));
  }
  deleteUpstreamCredential(...a: Args<'deleteUpstreamCredential'>) {
    return this.around('deleteUpstreamCredential', () => this.inner.deleteUpstreamCredential(...a));
  }
  listSubjectUpstreamCredentials(...a: Args<'listSubjectUpstreamCredentials'>) {
    return this.around('listSubjectUpstreamCredentials', () => this.inner.listSubjectUpstreamCredentials(...a));
  }
  listUpstreamCredentials(...a: Args<'listUpstreamCredentials'>) {
    return this.around('listUpstreamCredentials', () => this.inner.listUpstreamCredentials(...a));
  }
  publishSigningKey(...a: Args<'publishSigningKey'>) {
    return this.around('publishSigningKey', () => this.inner.publishSigningKey(...a));
  }
  listSigningKeys(...a: Args<'listSigningKeys'>) {
    return this.around('listSigningKeys', () => this.inner.listSigningKeys(...a));
  }
  ping() {
    return this.around('ping', () => this.inner.ping());
  }
}
