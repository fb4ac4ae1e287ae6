// A throwaway self-signed TLS certificate for tests (localhost, 127.0.0.1, ::1), made by the openssl
// CLI in a temporary directory: test servers speak real TLS and clients trust exactly this certificate.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificate {
  /** PEM; also the CA to trust (the certificate is its own issuer). */
  cert: string;
  key: string;
}

export function createTestCertificate(): TestCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-test-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 },
    );
    return { cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), key: readFileSync(join(dir, 'key.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
