// Counting promises: how a test shows that a wrapper adds none (or exactly one) to a call.

import { AsyncResource, createHook, executionAsyncId } from 'node:async_hooks';

/**
 * Promises created by `run` and by what it awaits, to its end. Only promises descending from the call
 * (by execution or trigger async id) count: whatever else the process does meanwhile (the test runner's
 * own messages, another connection's replies) creates promises of its own, more of them the longer a
 * loaded machine makes the call take, and those would make two equal counts differ.
 */
export async function promisesOf(run: () => Promise<unknown>): Promise<number> {
  const root = new AsyncResource('promisesOf');
  const family = new Set<number>([root.asyncId()]);
  let count = 0;
  const hook = createHook({
    init(id, type, triggerId) {
      if (!family.has(triggerId) && !family.has(executionAsyncId())) return;
      family.add(id);
      if (type === 'PROMISE') count++;
    },
  });
  hook.enable();
  try {
    await root.runInAsyncScope(run);
  } finally {
    hook.disable();
    root.emitDestroy();
  }
  return count;
}
