// The WSGI upstream of test/support/wsgi-echo.py, run with the machine's python3: it answers each
// request with the HTTP_* environ its application saw, as JSON. Ready once it prints its port.

import { spawnProcess } from './process.ts';

export interface WsgiUpstream {
  /** http://127.0.0.1:PORT/mcp (the app answers every path alike) */
  url: string;
  close(): Promise<void>;
}

export async function startWsgiUpstream(): Promise<WsgiUpstream> {
  const started = spawnProcess(['python3', '-u', 'test/support/wsgi-echo.py'], { PATH: process.env.PATH });
  await started.waitFor((out) => /^\d+\n/.test(out));
  const port = Number(started.output().split('\n')[0]);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      started.child.kill();
      await started.exit;
    },
  };
}
