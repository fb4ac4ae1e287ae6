// The least-privilege ACL users the docs tell operators to create, read from the docs as an operator
// would paste them (`ACL SETUSER mcp-sidecar ...` in a fenced block), for tests that set them on a
// Redis of their own and run the sidecar's store as that user. Redis's `ACL LOG` then tells what it
// refused.

import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

/**
 * The `ACL SETUSER mcp-sidecar` blocks of a doc (`docs/<name>.md`), in its order, as arguments for
 * `user`: the password placeholder (`>CHANGE-ME`) and the default key prefix (`mcpauth:`, in key and
 * channel patterns) replaced by the test's.
 */
export function documentedAcl(name: string, user: string, prefix: string, password: string): string[][] {
  const doc = readFileSync(new URL(`../../docs/${name}.md`, import.meta.url), 'utf8');
  return [...doc.matchAll(/```\nACL SETUSER mcp-sidecar ([\s\S]*?)\n```/g)].map((m) => [
    user,
    ...m[1]!
      .split(/\s+/)
      .filter((rule) => rule !== '')
      .map((rule) => (rule === '>CHANGE-ME' ? `>${password}` : rule.replace(/^([~&%RW]*)mcpauth:/, `$1${prefix}`))),
  ]);
}

/** What Redis refused since the last `ACL LOG RESET`: each entry's reason, object and username. */
export async function aclRefusals(node: Redis | Cluster): Promise<Array<{ reason: string; object: string; username: string }>> {
  const entries = (await node.call('ACL', 'LOG')) as unknown[][];
  return entries.map((flat) => {
    const fields: Record<string, unknown> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = flat[i + 1];
    return { reason: String(fields.reason), object: String(fields.object), username: String(fields.username) };
  });
}
