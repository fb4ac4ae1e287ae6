// Session and task handles bound to the principal that received them.

/**
 * What an upstream hands a caller and later takes back as the only proof of whose it is: an MCP
 * session (`Mcp-Session-Id`) or a task (`taskId`). Stored only as the SHA-256 of the handle.
 */
export type HandleKind = 'session' | 'task';

/**
 * Who a handle belongs to. `id` is the whole identity compared on every use (kind, subject and client
 * id together: src/proxy/handles.ts); `clientId` and `subjectHash` (SHA-256 hex of an IdP subject) name
 * the indexes that deleteClient and forgetSubjectHandles find the handle by.
 */
export interface HandleOwner {
  id: string;
  clientId?: string;
  subjectHash?: string;
}

/** `owned`: recorded for this owner (its life extended). `foreign`: for another. `unknown`: not recorded. */
export type HandleUse = 'owned' | 'foreign' | 'unknown';

/**
 * A handle's record as stored: its owner's identity, its last renewal (epoch ms text, if any), and for
 * a session whether its client declared URL-mode elicitation when it initialized.
 */
export interface StoredHandle {
  owner: string;
  renewedAt?: string;
  urlElicitation?: true;
}

/** `bound`: recorded now for this owner. */
export type HandleBinding = 'bound' | 'owned' | 'foreign';

/**
 * Session and task handles bound to the principal that received them (or, in forward-auth, first
 * presented them), with a sliding lifetime. An owner holds at most `maxPerOwner` live handles per index
 * (client, subject): past it, its handle least recently used is forgotten.
 */
export interface HandleStorage {
  /**
   * The handle's record, read only (one plain read, which a caller can issue beside the token lookup
   * so both leave in one write); null when none. Its owner's use is then decided by the caller, and
   * a use due a renewal (handleRenewalDue) goes through useHandle.
   */
  readHandle(kind: HandleKind, handleHash: string): Promise<StoredHandle | null>;
  /**
   * Whose the handle is, in one round trip; when it is `owner`'s, its life is extended to `now + ttlMs`.
   * A handle recorded for another owner is left as it is.
   */
  useHandle(kind: HandleKind, handleHash: string, owner: HandleOwner, now: number, ttlMs: number, maxPerOwner: number): Promise<HandleUse>;
  /**
   * Like useHandle, but a handle not recorded yet is recorded for `owner` (atomically with the read),
   * marked `urlElicitation` when asked (a session whose `initialize` declared it); an existing record's
   * mark is left as it is.
   */
  bindHandle(
    kind: HandleKind,
    handleHash: string,
    owner: HandleOwner,
    now: number,
    ttlMs: number,
    maxPerOwner: number,
    marks?: { urlElicitation?: boolean },
  ): Promise<HandleBinding>;
  /** Forgets one handle (a session ended by DELETE); false when none was recorded. */
  forgetHandle(kind: HandleKind, handleHash: string): Promise<boolean>;
  /** Forgets every handle of an IdP subject (whatever client it came through); returns how many. */
  forgetSubjectHandles(subject: string): Promise<number>;
}
