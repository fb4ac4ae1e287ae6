// The person index: from an IdP subject to everything it holds, and offboarding's cut-offs.

import type { ConsentRecord } from '../sign-in/types.ts';
import type { SubjectToken } from '../../model/records.ts';

/**
 * Offboarding's cut-off: when a person was last revoked (`revokeSubject`). What was issued for them
 * at or before it and is still pending (a code not yet redeemed, a device approval not yet polled, an
 * account-page session, a connect link or a connect flow in progress) is refused when it is used.
 */
export interface SubjectCutoffStorage {
  /**
   * Records that everything issued for `subject` (at `issuer`, or at every issuer when undefined) at
   * or before `at` is void; kept until `keepUntil` (the longest any such artefact lives).
   */
  markSubjectRevoked(subject: string, issuer: string | undefined, at: number, keepUntil: number): Promise<void>;
  /** The latest cut-off that applies to `subject` at `issuer` (its own or the every-issuer one), or undefined. */
  subjectRevokedAt(subject: string, issuer: string): Promise<number | undefined>;
}

/** A remembered approval of an IdP subject, with the browser it is kept for (never the cookie). */
export interface SubjectConsent extends ConsentRecord {
  browserHash: string;
  /** Its field in the browser's approvals (consentKey). */
  key: string;
}

/** What revoking a subject took away, by kind. */
export interface SubjectRevocation {
  accessTokensRevoked: number;
  refreshTokensRevoked: number;
  userTokensRevoked: number;
  consentsForgotten: number;
}

/** What a rebuild of the subject index went through: records read and index members written. */
export interface SubjectIndexRebuild {
  scanned: number;
  indexed: number;
}

/**
 * The per-subject index: from an IdP subject to everything it holds (user-grade tokens, OAuth access
 * and refresh tokens, remembered consents). Members are written with their record; members whose
 * record has expired, been deleted or revoked are dropped when read, so a read is exact. Work on a
 * subject goes in batches of at most `batchSize` members (bounded time per Redis command, bounded
 * memory).
 */
export interface SubjectStorage {
  /** Every live, unrevoked token of the subject at `now` (of `issuer` only, when given). */
  listSubjectTokens(subject: string, now: number, issuer?: string): Promise<SubjectToken[]>;
  /** Every live, unrevoked access and refresh token of a client at `now`. */
  listClientTokens(clientId: string, now: number): Promise<SubjectToken[]>;
  /** Every remembered approval of the subject not expired at `now`. */
  listSubjectConsents(subject: string, now: number): Promise<SubjectConsent[]>;
  /**
   * Revokes everything the subject holds (of `issuer` only, when given): user-grade tokens get
   * revoked="true", access and refresh tokens revokedAt, approvals are forgotten; every sidecar is told
   * (open streams end). A second call finds nothing left: zeros. Handles are HandleStorage's.
   */
  revokeSubject(subject: string, issuer: string | undefined, now: number, batchSize: number): Promise<SubjectRevocation>;
  /** Indexes every stored record of a subject (records written before the index existed), scanning in batches. */
  rebuildSubjectIndex(now: number, batchSize: number): Promise<SubjectIndexRebuild>;
  /**
   * Records when tokens were last presented (`lastUsedAt` on each record still stored; a time never
   * goes back). Called in batches by the last-use recorder, not per request.
   */
  recordLastUse(uses: ReadonlyArray<{ tokenHash: string; kind: 'user' | 'oauth'; at: number }>): Promise<void>;
}
