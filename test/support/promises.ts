// Counting promises: how a test shows that a wrapper adds none (or exactly one) to a call.

import { createHook } from 'node:async_hooks';

/** Promises created while `run` runs to its end (async_hooks sees every native promise). */
export async function promisesOf(run: () => Promise<unknown>): Promise<number> {
  let count = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') count++;
    },
  });
  hook.enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return count;
}
