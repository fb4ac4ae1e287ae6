// The store contract's slice for lifecycle: lifecycle and failures.

import { beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../../src/store/shared.ts';
import type { ManualClock } from '../../../src/model/clock.ts';
import { hashToken } from '../../../src/model/credentials.ts';
import { handleOwner } from '../../../src/proxy/handles.ts';
import type { StoreOperation } from '../../../src/store/decorator.ts';
import { DuplicateRecordError, type TokenStore } from '../../../src/store/types.ts';
import type { ClientRecord } from '../../../src/model/records.ts';
import { type Contract, contractHelpers, HOUR } from './context.ts';

export function lifecycleContract(contract: Contract): void {
  let clock: ManualClock;
  let store: TokenStore;
  beforeEach(() => {
    ({ clock, store } = contract);
  });
  const { pendingRequest, userRecord, client, accessToken, refreshToken, upstreamCredential } = contractHelpers(contract);

  const directoryUser = () => ({
    id: 'u',
    provider: 'default',
    userName: 'u',
    active: true,
    attributes: {},
    createdAt: contract.clock.now(),
    updatedAt: contract.clock.now(),
    version: 1,
  });

  describe('lifecycle and failures', () => {
    // One call of every operation; a new operation must be added here (the type insists).
    const everyOperation = {
      lookupToken: (s) => s.lookupToken(hashToken('x')),
      putUserToken: (s) => s.putUserToken(userRecord().record),
      revokeUserToken: (s) => s.revokeUserToken(hashToken('x')),
      createAccessToken: (s) => s.createAccessToken(accessToken('mcp_gone').record),
      revokeAccessToken: (s) => s.revokeAccessToken(hashToken('x'), clock.now()),
      issueTokens: (s) => s.issueTokens(accessToken('mcp_gone').record, refreshToken('mcp_gone', 'fam').record),
      createClient: (s) => s.createClient(client('mcp_gone').record),
      getClient: (s) => s.getClient('mcp_gone'),
      listClients: (s) => s.listClients(),
      deleteClient: (s) => s.deleteClient('mcp_gone', clock.now()),
      touchClient: (s) => s.touchClient('mcp_gone', HOUR),
      getRefreshToken: (s) => s.getRefreshToken(hashToken('x')),
      rotateRefreshToken: (s) =>
        s.rotateRefreshToken(
          hashToken('x'),
          'mcp_gone',
          clock.now(),
          accessToken('mcp_gone').record,
          refreshToken('mcp_gone', 'fam').record,
        ),
      revokeRefreshFamily: (s) => s.revokeRefreshFamily(hashToken('x'), clock.now()),
      putAuthorizationRequest: (s) => s.putAuthorizationRequest(hashToken('x'), pendingRequest(), clock.now() + HOUR),
      takeAuthorizationRequest: (s) => s.takeAuthorizationRequest(hashToken('x')),
      putPendingSignIn: (s) =>
        s.putPendingSignIn(hashToken('x'), pendingRequest(), clock.now() + HOUR, {
          address: '192.0.2.1',
          clientId: 'c',
          perAddress: 1,
          perClient: 1,
          now: clock.now(),
        }),
      putAuthorizationCode: (s) =>
        s.putAuthorizationCode({
          codeHash: hashToken('x'),
          clientId: 'mcp_gone',
          redirectUri: 'http://127.0.0.1/cb',
          codeChallenge: 'c',
          resource: 'r',
          user: { subject: 's', issuer: 'i' },
          createdAt: clock.now(),
          expiresAt: clock.now() + 60_000,
        }),
      getAuthorizationCode: (s) => s.getAuthorizationCode(hashToken('x')),
      redeemAuthorizationCode: (s) =>
        s.redeemAuthorizationCode(hashToken('x'), 'mcp_gone', clock.now(), HOUR, accessToken('mcp_gone').record),
      putConsent: (s) =>
        s.putConsent(
          hashToken('x'),
          {
            clientId: 'c',
            clientCreatedAt: 1,
            redirectUri: 'r',
            issuer: 'i',
            subject: 's',
            approvedAt: 1,
            expiresAt: clock.now() + HOUR,
          },
          clock.now(),
          20,
        ),
      listConsents: (s) => s.listConsents(hashToken('x'), clock.now()),
      putDeviceAuthorization: (s) =>
        s.putDeviceAuthorization(
          {
            deviceCodeHash: hashToken('d'),
            userCodeHash: hashToken('u'),
            clientId: 'c',
            interval: 5,
            createdAt: clock.now(),
            expiresAt: clock.now() + 60_000,
          },
          60_000,
          { address: 'a', perAddress: 1, total: 1, now: clock.now() },
        ),
      findDeviceAuthorization: (s) => s.findDeviceAuthorization(hashToken('u')),
      decideDeviceAuthorization: (s) => s.decideDeviceAuthorization(hashToken('d'), clock.now(), undefined),
      pollDeviceAuthorization: (s) => s.pollDeviceAuthorization(hashToken('d'), 'c', clock.now()),
      linkConsentGrant: (s) => s.linkConsentGrant('fam', hashToken('x'), 'k', clock.now() + HOUR),
      hitCounter: (s) => s.hitCounter('gone', 60_000),
      useOnce: (s) => s.useOnce('gone', clock.now() + 60_000),
      takeQuota: (s) => s.takeQuota('gone', 1, 1, 60_000, clock.now()),
      seedProfiles: (s) =>
        s.seedProfiles([
          {
            name: 'gone',
            description: '',
            accessTokenLifetimeSeconds: 60,
            refreshTokenLifetimeSeconds: 0,
            grantTypes: [],
            createdAt: clock.now(),
          },
        ]),
      getProfile: (s) => s.getProfile('gone'),
      getProfileFields: (s) => s.getProfileFields('gone'),
      listProfiles: (s) => s.listProfiles(),
      appendAudit: (s) => s.appendAudit({ at: clock.now(), who: 'master', action: 'x', result: 'ok' }, 10),
      listAuditEvents: (s) => s.listAuditEvents(10),
      subscribeRevocations: (s) => s.subscribeRevocations({ revoked: () => undefined, missed: () => undefined }),
      publishSigningKey: (s) => s.publishSigningKey({ kid: 'k', jwk: '{}', expiresAt: clock.now() + HOUR }, clock.now()),
      listSigningKeys: (s) => s.listSigningKeys(clock.now()),
      putUpstreamCredential: (s) => s.putUpstreamCredential(upstreamCredential()),
      getUpstreamCredential: (s) => s.getUpstreamCredential('s', 'i', 'idp'),
      replaceUpstreamCredential: (s) => s.replaceUpstreamCredential(upstreamCredential(), 'x'),
      deleteUpstreamCredentials: (s) => s.deleteUpstreamCredentials('s'),
      listUpstreamCredentials: (s) => s.listUpstreamCredentials(),
      deleteUpstreamCredential: (s) => s.deleteUpstreamCredential('s', 'i', 'idp'),
      listSubjectUpstreamCredentials: (s) => s.listSubjectUpstreamCredentials('s'),
      ping: (s) => s.ping(),
      readHandle: (s) => s.readHandle('session', hashToken('x')),
      useHandle: (s) => s.useHandle('session', hashToken('x'), handleOwner({ kind: 'user', subject: 's' }), clock.now(), HOUR, 10),
      bindHandle: (s) => s.bindHandle('session', hashToken('x'), handleOwner({ kind: 'user', subject: 's' }), clock.now(), HOUR, 10),
      forgetHandle: (s) => s.forgetHandle('session', hashToken('x')),
      forgetSubjectHandles: (s) => s.forgetSubjectHandles('s'),
      listSubjectTokens: (s) => s.listSubjectTokens('s', clock.now()),
      listClientTokens: (s) => s.listClientTokens('c', clock.now()),
      listSubjectConsents: (s) => s.listSubjectConsents('s', clock.now()),
      revokeSubject: (s) => s.revokeSubject('s', undefined, clock.now(), 10),
      rebuildSubjectIndex: (s) => s.rebuildSubjectIndex(clock.now(), 10),
      recordLastUse: (s) => s.recordLastUse([{ tokenHash: hashToken('x'), kind: 'user', at: clock.now() }]),
      putAccountSession: (s) =>
        s.putAccountSession(hashToken('x'), {
          user: { subject: 's', issuer: 'i' },
          createdAt: clock.now(),
          expiresAt: clock.now() + HOUR,
        }),
      getAccountSession: (s) => s.getAccountSession(hashToken('x'), clock.now()),
      deleteAccountSession: (s) => s.deleteAccountSession(hashToken('x')),
      markSubjectRevoked: (s) => s.markSubjectRevoked('s', undefined, clock.now(), clock.now() + HOUR),
      subjectRevokedAt: (s) => s.subjectRevokedAt('s', 'i'),
      forgetConsent: (s) => s.forgetConsent(hashToken('x'), hashToken('k'), 's'),
      createDirectoryUser: (s) => s.createDirectoryUser(directoryUser()),
      getDirectoryUser: (s) => s.getDirectoryUser('u'),
      findDirectoryUser: (s) => s.findDirectoryUser('default', 'userName', 'u'),
      updateDirectoryUser: (s) => s.updateDirectoryUser('u', (u) => u, clock.now()),
      deleteDirectoryUser: (s) => s.deleteDirectoryUser('u', clock.now()),
      linkDirectoryIdentity: (s) => s.linkDirectoryIdentity('default', 'a@example.com', { subject: 's', issuer: 'i' }, clock.now()),
      listDirectoryUsers: (s) => s.listDirectoryUsers('default', 0, 10),
      linkedDirectoryIdentities: (s) => s.linkedDirectoryIdentities('default', 'a@example.com'),
      putApproval: (s) =>
        s.putApproval(
          {
            approvalId: 'a',
            argumentsDigest: hashToken('x'),
            rule: 'r',
            subject: 's',
            tool: 't',
            arguments: '{}',
            approvers: 'self',
            notSelf: false,
            state: 'pending',
            requestedAt: clock.now(),
            expiresAt: clock.now() + HOUR,
          },
          HOUR,
        ),
      getApproval: (s) => s.getApproval('a'),
      useApproval: (s) => s.useApproval(hashToken('x'), clock.now()),
      decideApproval: (s) => s.decideApproval('a', clock.now(), { approve: true, by: 'b' }),
      listApprovals: (s) => s.listApprovals(clock.now(), 10),
      cancelSubjectApprovals: (s) => s.cancelSubjectApprovals('s', undefined, clock.now()),
    } satisfies Record<StoreOperation, (s: TokenStore) => Promise<unknown>>;

    it('ping answers while open; close resolves and later calls reject', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
      await expect(store.close()).resolves.toBeUndefined();
      await expect(store.lookupToken(hashToken('x'))).rejects.toThrow();
      await expect(store.ping()).rejects.toThrow();
    });

    it('once the store cannot answer, every operation rejects with StoreUnavailableError (the outage, not a bug)', async () => {
      await store.close();
      for (const [name, call] of Object.entries(everyOperation)) {
        const err = await call(store).then(
          () => new Error(`${name} resolved on a closed store`),
          (e: unknown) => e,
        );
        expect(err, name).toBeInstanceOf(StoreUnavailableError);
      }
    });

    it('a bug under a store call (a TypeError) is not reported as the store being unavailable', async () => {
      const err = await store.createClient(undefined as unknown as ClientRecord).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TypeError);
      expect(err).not.toBeInstanceOf(StoreUnavailableError);
    });

    it('creating a client whose id exists is DuplicateRecordError, not an outage, and leaves the first one', async () => {
      const first = client('mcp_twice');
      await store.createClient(first.record);
      await expect(store.createClient(client('mcp_twice', { clientName: 'second' }).record)).rejects.toBeInstanceOf(DuplicateRecordError);
      expect(await store.getClient('mcp_twice')).toEqual(first.record);
    });
  });
}
