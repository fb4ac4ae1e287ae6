// A store around another store: every operation of TokenStore delegated through one hook (`around`)
// that a decorator fills in (the Redis store's failure boundary, the metrics' timing). The operations
// are not written out: the class defines one for every name of STORE_OPERATIONS (operations.ts), whose
// table does not compile while an operation of TokenStore is missing from it, so no operation can slip
// past a decorator. `close` and `watch` pass through untouched.

import { STORE_OPERATION_NAMES, type StoreOperation, type StoreOperations } from './operations.ts';
import type { StoreWatch, TokenStore } from './types.ts';
import type { TokenLookup } from '../model/records.ts';

export type { StoreOperation } from './operations.ts';

// The class's instances carry every operation (defined on its prototype by the loop in it): the
// interface says so to the type checker, which cannot see a loop's definitions.
export interface StoreDecorator<S extends TokenStore = TokenStore> extends Omit<StoreOperations, 'lookupToken'> {}

export abstract class StoreDecorator<S extends TokenStore = TokenStore> implements TokenStore {
  protected readonly inner: S;

  constructor(inner: S) {
    this.inner = inner;
  }

  /** Runs one operation of the inner store (`call`), adding what this decorator is for. */
  protected abstract around<T>(operation: StoreOperation, call: () => Promise<T>): Promise<T>;

  get watch(): StoreWatch | undefined {
    return this.inner.watch;
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  // The hot path, one per proxied request: written out (no rest array) for decorators to override.
  lookupToken(tokenHash: string): Promise<TokenLookup> {
    return this.around('lookupToken', () => this.inner.lookupToken(tokenHash));
  }

  // Every other operation, on the prototype: a subclass's own method of the same name (RedisTokenStore's
  // close, a test's override) still wins.
  static {
    for (const name of STORE_OPERATION_NAMES) {
      if (Object.prototype.hasOwnProperty.call(StoreDecorator.prototype, name)) continue;
      Object.defineProperty(StoreDecorator.prototype, name, {
        value: function (this: StoreDecorator, ...args: unknown[]): Promise<unknown> {
          const inner = this.inner as unknown as Record<StoreOperation, (...a: unknown[]) => Promise<unknown>>;
          return this.around(name, () => inner[name](...args));
        },
        writable: true,
        configurable: true,
      });
    }
  }
}
