// The reference MCP upstream (examples/upstream) in a process of its own, with the bench-only
// synthetic SSE streams switched on.

import { startUpstream } from '../examples/upstream/server.ts';
import { serveChild } from './child-ipc.ts';

const upstream = await startUpstream({ host: '127.0.0.1', port: 0, syntheticStreams: true });
serveChild({ url: upstream.url }, () => upstream.close());
