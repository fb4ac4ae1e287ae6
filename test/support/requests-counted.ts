// `mcp_auth_requests_total` as a test reads it: scraped from the admin listener's GET /metrics, as
// Prometheus would, and the check that one request moved it by exactly one, under the outcome and
// reason expected, and moved nothing else.

import { expect } from 'vitest';

/** The outcome and reason labels of one series (the reason is empty unless given). */
export interface CountedAs {
  outcome: string;
  reason?: string;
}

/** Every series of `mcp_auth_requests_total`, by its `outcome` and `reason` labels. */
export async function requestCounts(adminUrl: string): Promise<Map<string, number>> {
  const res = await fetch(`${adminUrl}/metrics`);
  expect(res.status).toBe(200);
  const counts = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    const m = /^mcp_auth_requests_total\{outcome="([^"]*)",reason="([^"]*)"\} (\S+)$/.exec(line);
    if (m) counts.set(`${m[1]}/${m[2]}`, Number(m[3]));
  }
  return counts;
}

const total = (counts: Map<string, number>): number => [...counts.values()].reduce((sum, n) => sum + n, 0);

/**
 * Sends one request through the sidecar and checks that it was counted once: its series moved by one
 * and no other moved. Nothing else may reach the listener meanwhile. Returns what `send` returned.
 */
export async function countedOnce<T>(adminUrl: string, as: CountedAs, send: () => Promise<T>): Promise<T> {
  const key = `${as.outcome}/${as.reason ?? ''}`;
  const before = await requestCounts(adminUrl);
  const result = await send();
  const after = await requestCounts(adminUrl);
  expect({ [key]: (after.get(key) ?? 0) - (before.get(key) ?? 0), total: total(after) - total(before) }).toEqual({ [key]: 1, total: 1 });
  return result;
}
