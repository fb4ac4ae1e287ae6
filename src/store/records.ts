// How records become flat string hash fields and back: shared by both stores so they hold the same
// bytes, and documented field by field in docs/storage.md. Timestamps are integer epoch ms. Each
// aggregate's codec sits beside its stores (src/store/<aggregate>/records.ts); this is their one door.

export {
  type Fields,
  userFields,
  userFromFields,
  readRecord,
  orNull,
  type HashUpdate,
  writesHash,
  stepUpdate,
  creationUpdate,
} from './codec.ts';
export {
  keyLayout,
  type KeyLayout,
  allBuckets,
  clientBucket,
  hashBucket,
  escapeGlob,
  globMatcher,
  CURRENT_LAYOUT,
  OAUTH_BUCKETS,
} from './key-layout.ts';
export { handleMember, subjectDigest, handleRenewalDue, handleFields } from './handles/records.ts';
export {
  ACCESS_MEMBER,
  REFRESH_MEMBER,
  USER_MEMBER,
  CONSENT_MEMBER,
  consentMember,
  parseConsentMember,
  EVERY_ISSUER,
  cutoffFromFields,
  consentKey,
  consentValue,
  consentFromValue,
  approvalExpiries,
  consentGrantIds,
  approvalForgetUpdate,
} from './subjects/records.ts';
export {
  subjectTokenFromFields,
  userTokenFields,
  accessTokenFields,
  userTokenFromFields,
  accessTokenFromFields,
  tokenLookupFromFields,
  revocationUpdate,
  lastUseUpdate,
  userRevocationUpdate,
  subjectUserRevocationUpdate,
} from './tokens/records.ts';
export {
  reuseNotice,
  authorizationCodeFields,
  authorizationRequestFields,
  authorizationRequestFromFields,
  authorizationCodeFromFields,
  pendingSignInMember,
  accountSessionFields,
  accountSessionFromFields,
} from './sign-in/records.ts';
export { refreshTokenFields, refreshTokenFromFields } from './refresh-tokens/records.ts';
export { clientFields, clientFromFields, profileFields, profileFromFields } from './clients/records.ts';
export {
  auditFields,
  auditFromFields,
  signingKeyValue,
  signingKeyFromValue,
  listedSigningKeys,
  newestAuditFirst,
  signingKeyPublication,
} from './infrastructure/records.ts';
export { deviceAuthorizationFields, deviceAuthorizationFromFields, devicePollUpdate, deviceDecisionUpdate } from './devices/records.ts';
export {
  upstreamCredentialField,
  upstreamCredentialValue,
  upstreamCredentialFromValue,
  subjectUpstreamCredentials,
  sameUpstreamIdentity,
  credentialReplacementUpdate,
  credentialsDeletionUpdate,
} from './upstream-credentials/records.ts';
