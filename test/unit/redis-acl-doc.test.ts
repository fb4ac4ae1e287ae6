// The least-privilege ACL user in docs/security.md must allow every command the store's plan script
// may run (the keyspace port's two lists), and the scans the store reads with (the port's scans, and
// SCAN for the person index's rebuild): a command missing there is refused by Redis at the first
// plan that names it, which start-up's probe catches only for the commands it tries.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { READ_COMMANDS, SCAN_COMMANDS, WRITE_COMMANDS } from '../../src/store/keyspace.ts';

describe('the ACL user of docs/security.md', () => {
  it('allows every command a plan may name, the scans, and EVALSHA that runs the plans', () => {
    const doc = readFileSync('docs/security.md', 'utf8');
    const block = /```\nACL SETUSER mcp-sidecar [\s\S]*?```/.exec(doc)?.[0];
    expect(block).toBeDefined();
    const allowed = new Set([...block!.matchAll(/\+([a-z|]+)/g)].map((m) => m[1]!.toUpperCase()));
    const missing = [...READ_COMMANDS, ...WRITE_COMMANDS, ...SCAN_COMMANDS, 'SCAN', 'EVALSHA', 'EVAL'].filter((name) => !allowed.has(name));
    expect(missing).toEqual([]);
  });
});
