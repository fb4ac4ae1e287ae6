// What a refresh of a kept upstream credential leaves behind (src/upstream-credentials/events.ts): the
// refreshes counter by result; an audit event by user and provider for a renewal and for a refusal
// (the end of that credential); nothing audited for a provider that could not be reached.

import { describe, expect, it } from 'vitest';
import type { AuditInput } from '../../src/observability/audit.ts';
import { Metrics } from '../../src/observability/metrics.ts';
import { refreshRecorder } from '../../src/upstream-credentials/events.ts';

const WHO = { subject: 'alice', issuer: 'https://idp.example/', provider: 'oauth:github.com' };

function setUp() {
  const metrics = new Metrics({ defaultMetrics: false });
  const recorded: Array<{ input: AuditInput; level: string }> = [];
  const audit = { record: async (input: AuditInput, level: 'info' | 'warn' = 'info') => void recorded.push({ input, level }) };
  return { metrics, recorded, record: refreshRecorder({ metrics, audit }) };
}

async function count(metrics: Metrics, result: string): Promise<number> {
  const values = (await metrics.upstreamCredentialRefreshes.get()).values;
  return values.find((v) => v.labels.result === result)?.value ?? 0;
}

describe('refresh events', () => {
  it('a renewal: counted ok, audited as upstream_credential_refreshed with the subject and provider', async () => {
    const { metrics, recorded, record } = setUp();
    record('ok', WHO);
    expect(await count(metrics, 'ok')).toBe(1);
    expect(recorded).toEqual([
      {
        input: {
          who: 'user',
          action: 'upstream_credential_refreshed',
          result: 'ok',
          subject: 'alice',
          detail: { provider: 'oauth:github.com' },
        },
        level: 'info',
      },
    ]);
  });

  it('a refusal for good: counted refused, audited as upstream_credential_disconnected (a warning) with the reason', async () => {
    const { metrics, recorded, record } = setUp();
    record('refused', WHO);
    expect(await count(metrics, 'refused')).toBe(1);
    expect(recorded).toEqual([
      {
        input: {
          who: 'user',
          action: 'upstream_credential_disconnected',
          result: 'ok',
          subject: 'alice',
          detail: { provider: 'oauth:github.com', reason: 'refresh_refused' },
        },
        level: 'warn',
      },
    ]);
  });

  it('an unreachable provider: counted unavailable, not audited (a passing failure, logged where it happens)', async () => {
    const { metrics, recorded, record } = setUp();
    record('unavailable', WHO);
    expect(await count(metrics, 'unavailable')).toBe(1);
    expect(recorded).toEqual([]);
  });
});
