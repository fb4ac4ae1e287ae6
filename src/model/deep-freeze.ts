// Freezing a whole tree of plain values (the loaded configuration, a client's fetched key set): what
// is shared between requests cannot be changed by one of them.

/** `value` with every object and array reachable from it frozen; returns `value`. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
