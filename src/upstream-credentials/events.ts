// What a refresh of a kept credential leaves behind: the refreshes counter by result, and an audit
// event naming the user and the provider (never a token: none is handed here). A refresh the provider
// refuses is the end of that credential (the user must sign in or connect again): it is recorded as a
// disconnection. An unreachable provider is a passing failure: counted and logged, not audited.

import type { Audit } from '../observability/audit.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { CredentialIdentity } from './cipher.ts';
import type { RefreshResult } from './idp-mode.ts';

/** The audit actions of a kept credential's life (connected is recorded by the connect flow's caller). */
export const CREDENTIAL_ACTIONS = {
  connected: 'upstream_credential_connected',
  refreshed: 'upstream_credential_refreshed',
  disconnected: 'upstream_credential_disconnected',
} as const;

/** The `onRefresh` of a refreshing source: counts every refresh and audits the ones that change a credential. */
export function refreshRecorder(deps: { metrics: Pick<Metrics, 'upstreamCredentialRefreshes'>; audit: Pick<Audit, 'record'> }) {
  return (result: RefreshResult, who: CredentialIdentity): void => {
    deps.metrics.upstreamCredentialRefreshes.labels(result).inc();
    if (result === 'unavailable') return;
    // Recording never rejects; the request that caused the refresh does not wait for the audit stream.
    void deps.audit.record(
      result === 'ok'
        ? { who: 'user', action: CREDENTIAL_ACTIONS.refreshed, result: 'ok', subject: who.subject, detail: { provider: who.provider } }
        : {
            who: 'user',
            action: CREDENTIAL_ACTIONS.disconnected,
            result: 'ok',
            subject: who.subject,
            detail: { provider: who.provider, reason: 'refresh_refused' },
          },
      result === 'ok' ? 'info' : 'warn',
    );
  };
}
