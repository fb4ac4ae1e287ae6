// The connection the token lookups (and the reads that go with them) run on, apart from the main one:
// duplicateForLookups says why, ReadDeadlines how its reads stay bounded. It is opened by the first
// lookup (which waits for it within the same bound), re-established by ioredis after a failure like
// the main connection, and replaced when a lookup goes unanswered for the socket timeout.
// The reads of every lookup that starts in one turn of the event loop leave in one write (the
// connection batches its turn's commands, duplicateForLookups; on a cluster, ioredis's auto-pipelining
// does the same per node).

import { ReadDeadlines } from './read-deadlines.ts';
import { connectRedis, defaultSocketTimeoutMs, duplicateForLookups, type RedisClient } from './redis-connection.ts';
import { Cluster } from 'ioredis';
import { StoreUnavailableError } from './shared.ts';

export class LookupConnection {
  readonly #main: RedisClient;
  readonly #connectTimeoutMs: number;
  readonly #deadlines: ReadDeadlines;
  #client: RedisClient | undefined;
  #connecting: Promise<RedisClient> | undefined;
  #closed = false;

  constructor(main: RedisClient, connectTimeoutMs: number) {
    this.#main = main;
    this.#connectTimeoutMs = connectTimeoutMs;
    const options = main instanceof Cluster ? (main.options.redisOptions ?? {}) : main.options;
    const commandTimeoutMs = options.commandTimeout ?? 1000;
    this.#deadlines = new ReadDeadlines({
      commandTimeoutMs,
      socketTimeoutMs: options.socketTimeout ?? defaultSocketTimeoutMs(commandTimeoutMs),
      onStalled: () => this.#stalled(),
    });
  }

  /** The connection, once the first lookup has opened it. */
  get client(): RedisClient | undefined {
    return this.#client;
  }

  /** Whether lookups can run: the connection is ready, or there is none (the next lookup opens one). */
  get ready(): boolean {
    const client = this.#usable();
    return client === undefined || client.status === 'ready';
  }

  /** Answers once the connection answers a PING (when it is open; the readiness probe). */
  async ping(): Promise<void> {
    const client = this.#usable();
    if (client !== undefined) await this.#deadlines.bound(client.ping());
  }

  /** Two hashes read in one round trip (sent in one write with the turn's other reads), within the bound. */
  readHashes(first: string, second: string): Promise<[Record<string, string>, Record<string, string>]> {
    const client = this.#usable();
    return this.#deadlines.bound(
      client !== undefined
        ? Promise.all([client.hgetall(first), client.hgetall(second)])
        : this.#connect().then((c) => Promise.all([c.hgetall(first), c.hgetall(second)])),
    );
  }

  /**
   * Another read that goes with the token lookup (a presented session id's record): on this
   * connection it leaves in the same write as the lookup, within the same bound.
   */
  read<T>(command: (client: RedisClient) => Promise<T>): Promise<T> {
    const client = this.#usable();
    return this.#deadlines.bound(client !== undefined ? command(client) : this.#connect().then(command));
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#deadlines.stop();
    const client = this.#client;
    this.#client = undefined;
    if (client === undefined) return;
    if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
    else client.disconnect();
  }

  /**
   * A lookup went unanswered for the socket timeout: the connection is replaced, and the main one is
   * made to prove itself (a PING: if it is as dead, its own socket timeout replaces it too) rather than
   * wait for the next admin or OAuth request to find out.
   */
  #stalled(): void {
    this.#client?.disconnect(true);
    this.#main.ping().catch(() => undefined);
  }

  /** The open connection; undefined when there is none or it has ended for good (the next lookup opens another). */
  #usable(): RedisClient | undefined {
    const client = this.#client;
    if (client === undefined || client.status !== 'end') return client;
    this.#client = undefined;
    this.#connecting = undefined;
    return undefined;
  }

  #connect(): Promise<RedisClient> {
    // Closed, or the main connection down: answer at once (503) rather than open a connection now.
    if (this.#closed) return Promise.reject(new StoreUnavailableError('the store is closed'));
    if (this.#main.status !== 'ready') return Promise.reject(new StoreUnavailableError(`Redis connection is ${this.#main.status}`));
    this.#connecting ??= (async () => {
      const client = duplicateForLookups(this.#main);
      client.on('error', () => undefined); // surfaced through the failing lookup instead
      try {
        await connectRedis(client, this.#connectTimeoutMs);
      } catch (err) {
        client.disconnect();
        this.#connecting = undefined; // the next lookup tries again
        throw err;
      }
      if (this.#closed) {
        client.disconnect();
        throw new StoreUnavailableError('the store is closed');
      }
      this.#client = client;
      return client;
    })();
    return this.#connecting;
  }
}
