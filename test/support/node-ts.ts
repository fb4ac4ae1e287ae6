// How a test starts a TypeScript entry point as its own process: `node file.ts`, as production runs it
// (Node 22.18 and later strip the types themselves). A Node below that floor (a development machine that
// has not moved yet) cannot, and gets tsx's loader, a devDependency, in front.

/** Node options to put before a `.ts` entry point: none where Node runs TypeScript itself. */
export const RUN_TS: readonly string[] = process.features.typescript ? [] : ['--import', 'tsx'];

/** `node [options] <entry> ...args` with this test's Node. */
export function nodeTs(entry: string, ...args: string[]): string[] {
  return [process.execPath, ...RUN_TS, entry, ...args];
}
