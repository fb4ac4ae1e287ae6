// IPC protocol between bench/run.ts and the processes it forks: a child announces itself once with
// `{type:'ready', ...}`, then answers `{type:'stats', id, gc?}` with its own memory and CPU counters,
// and exits cleanly on `{type:'stop'}` (so `--cpu-prof` can write its profile).

import { writeHeapSnapshot } from 'node:v8';

export interface ProcessStats {
  rss: number;
  heapUsed: number;
  external: number;
  /** process.cpuUsage(): user + system, microseconds since the process started. */
  cpuMicros: number;
}

export type ChildRequest = { type: 'stats'; id: number; gc?: boolean; heapSnapshot?: string } | { type: 'stop' };
export type ChildMessage = { type: 'ready'; urls: Record<string, string> } | ({ type: 'stats'; id: number } & ProcessStats);

export function serveChild(urls: Record<string, string>, stop: () => Promise<void>): void {
  const send = (message: ChildMessage) => process.send?.(message);
  process.on('message', (message: ChildRequest) => {
    if (message.type === 'stats') {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (message.gc && gc) {
        gc();
        gc();
      }
      if (message.heapSnapshot) writeHeapSnapshot(message.heapSnapshot);
      const memory = process.memoryUsage();
      const cpu = process.cpuUsage();
      send({
        type: 'stats',
        id: message.id,
        rss: memory.rss,
        heapUsed: memory.heapUsed,
        external: memory.external,
        cpuMicros: cpu.user + cpu.system,
      });
    } else if (message.type === 'stop') {
      void stop().finally(() => process.exit(0));
    }
  });
  // The parent going away (Ctrl-C, crash) must not leave this process behind.
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', urls });
}
