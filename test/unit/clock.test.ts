// The system clock's deadlines: they fire, they cancel, and a cancelled one leaves nothing behind
// (token expiries are hours or days out, nearly all distinct to the millisecond, one per open stream).

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/model/clock.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('systemClock.at', () => {
  it('fires at the deadline, at once for one in the past, and not after cancelling', async () => {
    const fired: string[] = [];
    const cancel = systemClock.at(Date.now() + 5, () => fired.push('cancelled'));
    cancel();
    await new Promise<void>((resolve) => systemClock.at(Date.now() - 1000, () => resolve()));
    await new Promise<void>((resolve) => systemClock.at(Date.now() + 20, () => resolve()));
    expect(fired).toEqual([]);
  });

  it('cancelled far-off deadlines, each a different millisecond, do not pile up in memory', () => {
    const count = 50_000;
    const start = Date.now() + 3_600_000;
    // Warm up the code path, so compiled code is not counted.
    for (let i = 0; i < 1000; i++) systemClock.at(start - 10_000 + i, () => {})();
    const before = heapAfterGc();
    for (let i = 0; i < count; i++) systemClock.at(start + i, () => {})();
    const perDeadline = (heapAfterGc() - before) / count;
    // An unref'd timer left ~160 bytes per cancelled deadline behind (Node's per-delay timer lists).
    expect(perDeadline).toBeLessThan(20);
  });
});
