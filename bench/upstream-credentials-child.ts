// A sidecar of the upstream-credentials scenario (bench/upstream-credentials.ts): the whole configuration
// comes from the parent as JSON (BENCH_CONFIG), built and started as production builds it.
// BENCH_SRC_DIR runs another copy of src/ (an earlier commit, side by side).

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { serveChild } from './child-ipc.ts';

const src = process.env.BENCH_SRC_DIR ?? join(import.meta.dirname, '..', 'src');
const { createSidecar } = (await import(pathToFileURL(join(src, 'app.ts')).href)) as typeof import('../src/app.ts');
const { buildConfig } = (await import(pathToFileURL(join(src, 'config', 'load.ts')).href)) as typeof import('../src/config/load.ts');

const config = buildConfig(JSON.parse(process.env.BENCH_CONFIG ?? '{}') as Record<string, unknown>, {});
const sidecar = await createSidecar({ config });
const { proxyUrl, adminUrl } = await sidecar.listen();
serveChild({ proxyUrl, adminUrl }, () => sidecar.shutdown(1000));
