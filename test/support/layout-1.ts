// Stores of layout 1 (every OAuth record under the one `{oauth}` tag), written by the code that used
// that layout: its src/ is taken from git at LAYOUT_1_COMMIT (the last commit before the bucketed
// layout) into a temporary directory beside a link to this checkout's node_modules, and
// test/support/layout-1-writer.ts runs against that copy's RedisTokenStore in a child process.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { RUN_TS } from './node-ts.ts';
import { spawnProcess } from './process.ts';

/** The commit whose src/store wrote layout 1. */
export const LAYOUT_1_COMMIT = '2ec25b9544d689a9ab4dff97b690668946120cc2';

/** One token the writer issued, with what it must read as after the migration. */
export interface WrittenToken {
  raw: string;
  kind: 'access' | 'refresh' | 'user';
  clientId?: string;
  subject?: string;
  revoked: boolean;
}

export interface LayoutOneCode {
  dir: string;
  /** Writes `clients` clients with `pairs` access+refresh pairs each (and user-grade tokens) under `prefix`. */
  write(redisUrl: string, prefix: string, clients: number, pairs: number): Promise<WrittenToken[]>;
  cleanup(): void;
}

/** The layout-1 code, checked out of git (fails, saying so, in a clone without that commit). */
export function layoutOneCode(): LayoutOneCode {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-layout1-'));
  try {
    const archive = execFileSync('git', ['archive', '--format=tar', LAYOUT_1_COMMIT, 'src'], { maxBuffer: 256 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      `the layout-1 fixture needs commit ${LAYOUT_1_COMMIT} in this clone (git fetch --unshallow): ${(err as Error).message}`,
    );
  }
  symlinkSync(resolve('node_modules'), join(dir, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  return {
    dir,
    async write(redisUrl, prefix, clients, pairs) {
      const writer = spawnProcess(
        [process.execPath, ...RUN_TS, resolve('test/support/layout-1-writer.ts'), dir, redisUrl, prefix, String(clients), String(pairs)],
        process.env,
      );
      const code = await writer.exit;
      const out = writer.output();
      if (code !== 0) throw new Error(`the layout-1 writer failed (${code}):\n${out.slice(-2000)}`);
      return out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as WrittenToken);
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
