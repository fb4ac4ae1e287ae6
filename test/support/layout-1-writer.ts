// Child process of test/support/layout-1.ts: writes a store of layout 1 with the RedisTokenStore of
// the layout-1 code checked out at argv[2], and prints every token it issued (one JSON line each).
// argv: dir, redisUrl, prefix, clients, pairs per client.
// Per client: `pairs` access+refresh pairs (every third acting for the subject `person-<client % 7>`),
// the first pair's refresh token rotated once (its successor pair is the one printed), every fifth
// access token revoked; per client one user-grade token of the same subject, every fourth revoked.

import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, url, prefix, clientsText, pairsText] = process.argv.slice(2) as [string, string, string, string, string];
const { RedisTokenStore } = (await import(
  pathToFileURL(join(dir, 'src/store/redis.ts')).href
)) as typeof import('../../src/store/redis.ts');
const { createRedisClient, connectRedis } = (await import(
  pathToFileURL(join(dir, 'src/store/redis-connection.ts')).href
)) as typeof import('../../src/store/redis-connection.ts');

const token = () => randomBytes(32).toString('hex');
const hash = (raw: string) => createHash('sha256').update(raw).digest('hex');
const HOUR = 3_600_000;

const client = createRedisClient({ url, commandTimeoutMs: 10_000, connectTimeoutMs: 5000 });
await connectRedis(client, 5000);
const store = new RedisTokenStore(client, { keyPrefix: prefix });
const lines: string[] = [];
const clients = Number(clientsText);
const pairs = Number(pairsText);
const now = Date.now();
let n = 0;
await Promise.all(
  Array.from({ length: clients }, async (_, c) => {
    const clientId = `legacy-client-${c}`;
    const subject = `person-${c % 7}`;
    await store.createClient({
      clientId,
      clientName: clientId,
      redirectUris: [],
      grantTypes: ['client_credentials', 'refresh_token'],
      profile: 'default',
      tokenEndpointAuthMethod: 'client_secret_basic',
      clientSecretHash: hash(clientId),
      source: 'admin',
      createdAt: now,
    });
    for (let p = 0; p < pairs; p++) {
      const access = token();
      const refresh = token();
      const familyId = randomBytes(16).toString('hex');
      const user = p % 3 === 0 ? { user: { subject, issuer: 'https://idp.example/' } } : {};
      await store.issueTokens(
        { tokenHash: hash(access), clientId, familyId, createdAt: now, expiresAt: now + HOUR, ...user },
        { tokenHash: hash(refresh), clientId, familyId, createdAt: now, expiresAt: now + 24 * HOUR, ...user },
      );
      let [a, r] = [access, refresh];
      if (p === 0) {
        // One rotation, as the token endpoint does: the old refresh token keeps rotatedAt.
        [a, r] = [token(), token()];
        const outcome = await store.rotateRefreshToken(
          hash(refresh),
          clientId,
          now,
          { tokenHash: hash(a), clientId, familyId, createdAt: now, expiresAt: now + HOUR, ...user },
          { tokenHash: hash(r), clientId, familyId, createdAt: now, expiresAt: now + 24 * HOUR, ...user },
        );
        if (outcome !== 'ok') throw new Error(`rotation: ${outcome}`);
      }
      const revoked = n++ % 5 === 0;
      if (revoked) await store.revokeAccessToken(hash(a), now);
      lines.push(JSON.stringify({ raw: a, kind: 'access', clientId, revoked, ...('user' in user ? { subject } : {}) }));
      lines.push(JSON.stringify({ raw: r, kind: 'refresh', clientId, revoked: false, ...('user' in user ? { subject } : {}) }));
    }
    const userToken = token();
    await store.putUserToken({
      tokenHash: hash(userToken),
      subject,
      issuer: 'https://idp.example/',
      createdAt: now,
      expiresAt: now + HOUR,
    });
    const userRevoked = c % 4 === 0;
    if (userRevoked) await store.revokeUserToken(hash(userToken));
    lines.push(JSON.stringify({ raw: userToken, kind: 'user', subject, revoked: userRevoked }));
  }),
);
await store.close();
process.stdout.write(`${lines.join('\n')}\n`);
