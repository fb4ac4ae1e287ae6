// The approvals' key names under the prefix (docs/storage.md lists them).

/** The approvals' keys: one `{approvals}` slot, so recording one is one transaction. */
export function approvalKeys(prefix: string) {
  return {
    /**
     * A held call's approval, by its id (random, 32 hex). Approvals are a person's pace, not the request
     * rate: the three approval keys share one `{approvals}` slot, so a listing is one pipeline on Cluster.
     */
    approval: (approvalId: string) => `${prefix}{approvals}:approvals:${approvalId}`,
    /** The newest approval of one bound call: its argumentsDigest -> the approval id. */
    approvalDigest: (digest: string) => `${prefix}{approvals}:approvalDigests:${digest}`,
    /** Every approval kept: a sorted set, member = approval id, score = when its record goes. */
    approvalIndex: () => `${prefix}{approvals}:approvalIndex`,
  };
}
