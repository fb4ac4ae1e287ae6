// A sidecar of the upstream-credentials scenario (bench/upstream-credentials.ts): the whole configuration
// comes from the parent as JSON (BENCH_CONFIG), built and started as production builds it.

import { createSidecar } from '../src/app.ts';
import { buildConfig } from '../src/config/load.ts';
import { serveChild } from './child-ipc.ts';

const config = buildConfig(JSON.parse(process.env.BENCH_CONFIG ?? '{}') as Record<string, unknown>, {});
const sidecar = await createSidecar({ config });
const { proxyUrl, adminUrl } = await sidecar.listen();
serveChild({ proxyUrl, adminUrl }, () => sidecar.shutdown(1000));
