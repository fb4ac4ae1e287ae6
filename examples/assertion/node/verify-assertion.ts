// Verifying the sidecar's caller assertion in a Node upstream, with `jose` (npm install jose).
// Paste createAssertionVerifier into your server and call it on every request before doing anything:
//
//   const verify = createAssertionVerifier({
//     jwksUrl: 'https://mcp.example.com/.well-known/jwks.json', // the sidecar's PUBLIC_URL + this path
//     issuer: 'https://mcp.example.com',                        // the sidecar's PUBLIC_URL
//     audience: 'http://mcp-server:3000',                       // upstream.assertionAudience (default: your origin)
//   });
//   const caller = await verify(req.headers['x-mcp-auth-assertion']); // throws: answer 401
//   caller.sub, caller.mcp_kind, caller.client_id, caller.scope, caller.groups, caller.email
//
// As a command: `npx tsx verify-assertion.ts JWKS_URL ISSUER AUDIENCE < assertion` prints the claims
// (exit 0) or why the assertion is refused (exit 1).

import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type RemoteJWKSetOptions } from 'jose';

export interface AssertionVerifierOptions {
  jwksUrl: string;
  issuer: string;
  audience: string;
  /**
   * jose's JWKS cache. Its defaults suit the sidecar: an unknown `kid` (a new replica, a rotation)
   * refetches the set, at most once every 30 s (cooldownDuration).
   */
  jwks?: RemoteJWKSetOptions;
  /** The time to check `exp` against (tests); now by default. */
  currentDate?: () => Date;
}

/** The caller, as the sidecar authenticated it. */
export interface Caller extends JWTPayload {
  sub: string;
  mcp_kind: 'user' | 'oauth' | 'master';
  client_id?: string;
  scope?: string;
  groups?: string[];
  email?: string;
}

export function createAssertionVerifier(options: AssertionVerifierOptions): (header: string | string[] | undefined) => Promise<Caller> {
  const jwks = createRemoteJWKSet(new URL(options.jwksUrl), options.jwks);
  return async (header) => {
    if (typeof header !== 'string' || header === '') throw new Error('no X-MCP-Auth-Assertion header');
    const { payload } = await jwtVerify(header, jwks, {
      // Only ES256: `none`, HMAC (a public key used as a secret) and every other algorithm are refused.
      algorithms: ['ES256'],
      issuer: options.issuer,
      audience: options.audience,
      requiredClaims: ['sub', 'iat', 'exp', 'mcp_kind'],
      // 30 s of clock skew between the sidecar's host and this one, for exp and iat.
      clockTolerance: 30,
      currentDate: options.currentDate?.(),
    });
    return payload as Caller;
  };
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1]) && process.argv.length === 5) {
  const [jwksUrl, issuer, audience] = process.argv.slice(2) as [string, string, string];
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  try {
    const caller = await createAssertionVerifier({ jwksUrl, issuer, audience })(Buffer.concat(chunks).toString('utf8').trim());
    process.stdout.write(`${JSON.stringify(caller)}\n`);
  } catch (err) {
    process.stderr.write(`refused: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
