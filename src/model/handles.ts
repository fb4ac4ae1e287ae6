// An owner's index of session and task handles cleared (a client deleted, a person's handles
// forgotten), as a pure choice over what was read: the handles the index lists, each with the owner it
// names now. One transition (forgetIndexedHandles in src/store/handles/transitions.ts), run by both
// stores, reads them and writes what this answers only while what it read is unchanged.

/**
 * Of the handles an index lists (each member with the value of the owner's field its handle holds now;
 * null or undefined: the handle is gone), those still that owner's (`owner`): they are forgotten, then
 * the index. A member whose handle is someone else's by now is stale: that handle stays.
 */
export function indexedHandlesToForget(
  listed: ReadonlyArray<readonly [member: string, owner: string | null | undefined]>,
  owner: string,
): string[] {
  return listed.filter(([, holder]) => holder === owner).map(([member]) => member);
}
