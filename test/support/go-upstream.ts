// The Go upstream of test/support/go-upstream/main.go (encoding/json into structs, as Go MCP servers read
// messages), built with the Debian golang-go toolchain into a temporary directory: standard library
// only, a private build cache, no network. Ready once it prints its address; each call it runs is a line.

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { spawnProcess } from './process.ts';

export interface GoUpstream {
  url: string;
  /** `tools/call NAME` and `resources/read URI` for every call the upstream ran, in order. */
  executed(): string[];
  /** `NAME force=BOOL sudo=BOOL branch=STRING` for every tools/call it ran: its arguments as Go read them. */
  argumentsRead(): string[];
  close(): Promise<void>;
}

export async function startGoUpstream(): Promise<GoUpstream> {
  const dir = mkdtempSync(join(tmpdir(), 'go-upstream-'));
  const binary = join(dir, 'upstream');
  // cgo as the toolchain ships it: the standard library comes prebuilt, so the build takes seconds.
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    GOCACHE: join(dir, 'cache'),
    GOPATH: join(dir, 'gopath'),
    GO111MODULE: 'off',
    GOPROXY: 'off',
    GOTOOLCHAIN: 'local',
  };
  await promisify(execFile)('go', ['build', '-o', binary, join(process.cwd(), 'test/support/go-upstream/main.go')], { env });
  const started = spawnProcess([binary], {});
  await started.waitFor((out) => out.includes('\n'));
  const address = started.output().split('\n')[0]!;
  return {
    url: `http://${address}/mcp`,
    executed: () =>
      started
        .output()
        .split('\n')
        .filter((l) => l.startsWith('EXEC '))
        .map((l) => l.slice(5)),
    argumentsRead: () =>
      started
        .output()
        .split('\n')
        .filter((l) => l.startsWith('ARGS '))
        .map((l) => l.slice(5)),
    async close() {
      started.child.kill();
      await started.exit;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
