// A client record as the admin API creates one for client_credentials, for tests and benches that
// write clients straight into a store (the secret's hash is the hash of the client id: never used).

import { hashToken } from '../../src/model/credentials.ts';
import type { ClientRecord } from '../../src/model/records.ts';

export function credentialsClient(clientId: string, createdAt: number): ClientRecord {
  return {
    clientId,
    clientName: clientId,
    redirectUris: [],
    grantTypes: ['client_credentials'],
    profile: 'default',
    tokenEndpointAuthMethod: 'client_secret_basic',
    clientSecretHash: hashToken(clientId),
    source: 'admin',
    createdAt,
  };
}
