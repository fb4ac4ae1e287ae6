// A person is an identity provider's subject at that provider: (issuer, subject). Two providers issuing
// the same `sub` are two people. Per-person names (session and task handle owners and their index,
// quota counters, connected accounts) are spelled here, once.

import type { Principal } from './credentials.ts';

/** One person: the IdP that vouches for them and their `sub` there. */
export interface PersonId {
  readonly issuer: string;
  readonly subject: string;
}

/** Whether a principal acts for an IdP user (a user-grade token, or an OAuth token from sign-in), not for a client or the master. */
export function actsForPerson(principal: Pick<Principal, 'kind' | 'subject' | 'clientId'>): boolean {
  return principal.kind === 'user' || (principal.kind === 'oauth' && principal.subject !== principal.clientId);
}

/**
 * The person a principal acts for: its token's recorded issuer, or `defaultIssuer` for a record
 * written before issuers were kept (it belongs to the provider of the IDP_* variables).
 */
export function personOf(principal: Pick<Principal, 'subject' | 'issuer'>, defaultIssuer: string | undefined): PersonId {
  return { issuer: principal.issuer ?? defaultIssuer ?? '', subject: principal.subject };
}

/**
 * How per-person names spell a person: the subject alone for the default provider's people (and records
 * without an issuer), so that every name written while one provider was configured keeps naming the
 * same person; the issuer beside the subject for any other provider's, so the same `sub` there is
 * another name.
 */
export function personKey(person: PersonId, defaultIssuer: string | undefined): string {
  return person.issuer === '' || person.issuer === defaultIssuer ? person.subject : JSON.stringify([person.issuer, person.subject]);
}
