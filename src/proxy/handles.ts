// Session and task handles belong to the caller that received them: who that caller is, as the store
// records it (HandleOwner), and the answers a request presenting someone else's handle gets, which are
// the upstream's own answers to an unknown session or task, so a refusal tells nothing an unknown id
// would not.

import { createHash } from 'node:crypto';
import type { Principal } from '../model/credentials.ts';
import { HttpError } from '../http/errors.ts';
import { subjectDigest } from '../store/records.ts';
import type { HandleOwner } from '../store/types.ts';
import { actsForPerson, personKey, personOf } from '../model/person.ts';

/** The handle names Redis holds: the SHA-256 hex of the handle (a session id is a bearer-like secret). */
export function handleDigest(handle: string): string {
  return createHash('sha256').update(handle).digest('hex');
}

/**
 * The owner identity of a principal: its kind, subject and client id, all three. The kind keeps a
 * user-grade token of an IdP user apart from an OAuth token of the same user; the client id keeps one
 * user's sessions through two MCP clients apart (a compromised client holding the user's other
 * client's session id gets nothing); the subject keeps two users of one client apart. The token
 * itself is not part of it: a refreshed token keeps the sessions its predecessor opened.
 * Indexed by client (deleteClient) when it has one, and by subject (forgetSubjectHandles) when the
 * subject is an IdP user's (a user-grade token, or an OAuth token from sign-in: its subject is not
 * its client id); the master token's handles only expire. A person is named by personKey: the
 * subject alone for the default provider's (names written before several providers stay valid).
 */
export function handleOwner(principal: Principal, defaultIssuer?: string): HandleOwner {
  // The person, not the bare `sub`: another provider's person of the same `sub` is another owner.
  const who = actsForPerson(principal) ? personKey(personOf(principal, defaultIssuer), defaultIssuer) : principal.subject;
  const owner: HandleOwner = { id: JSON.stringify([principal.kind, who, principal.clientId ?? null]) };
  if (principal.clientId !== undefined) owner.clientId = principal.clientId;
  if (actsForPerson(principal)) owner.subjectHash = subjectDigest(who);
  return owner;
}

/** The JSON-RPC error code and message the official MCP SDK server answers an unknown session with. */
export const UNKNOWN_SESSION = Object.freeze({ code: -32001, message: 'Session not found' });

/**
 * A session id recorded for another principal: exactly what the MCP SDK's Streamable HTTP server
 * answers an unknown one (status 404, a JSON-RPC error with id null).
 */
export function unknownSession(): HttpError {
  return new HttpError('not_found', 'unknown session', { body: JSON.stringify({ jsonrpc: '2.0', error: UNKNOWN_SESSION, id: null }) });
}

/**
 * A task recorded for another principal: the answer the MCP Tasks specification (2025-11-25) gives an
 * invalid or nonexistent taskId, a JSON-RPC error -32602 (Invalid params), in the official SDK's words.
 */
export const UNKNOWN_TASK = Object.freeze({ code: -32602, message: 'Failed to retrieve task: Task not found' });
