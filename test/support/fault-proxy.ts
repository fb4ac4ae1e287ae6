// A small TCP fault proxy on loopback, put between the sidecar and Redis or the upstream. Every fault is
// a real socket behaviour, switched at run time:
//   pass       bytes flow both ways
//   down       the listener is closed (new connections refused) and open connections are reset
//   reset      connections are accepted and reset at once; open connections are reset too
//   blackhole  connections are accepted, nothing flows either way (bytes are held, as TCP would retransmit
//              them after a partition heals; back to `pass` delivers them)
//   slow       every chunk from the target is delivered `slowMs` late; in order, also across a switch
//              back to `pass` (later chunks wait behind the late ones, as TCP would keep them)
// A test can also intercept client->target bytes to cut a connection at an exact point of a protocol
// exchange (e.g. in the middle of a MULTI/EXEC), and count connections and bytes.

import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export type FaultMode = 'pass' | 'down' | 'reset' | 'blackhole' | 'slow';

/** What to do with a chunk the client sent: forward (part of) it, and then cut the connection or go on. */
export interface InterceptDecision {
  forward: Buffer;
  /** `cut`: reset both sides right after forwarding; `drop-replies`: keep the link but drop target replies. */
  then: 'continue' | 'cut' | 'drop-replies';
}
export type Interceptor = (chunk: Buffer, link: Link) => InterceptDecision | undefined;

export interface Link {
  readonly id: number;
  readonly client: Socket;
  readonly target: Socket;
  /** Bytes sent by the client so far (all chunks, forwarded or not). */
  clientBytes: number;
  targetBytes: number;
}

export interface FaultProxy {
  readonly host: string;
  readonly port: number;
  /** `tcp://host:port`-free helpers: a URL with the proxy's address in place of the target's. */
  url(scheme: string, path?: string): string;
  readonly mode: FaultMode;
  /** Switches the fault mode; `slowMs` applies to `slow`. Resolves once the change is in effect. */
  setMode(mode: FaultMode, options?: { slowMs?: number }): Promise<void>;
  /** Resets every open connection now (as a crash of the middlebox would). */
  resetAll(): void;
  /**
   * Blackholes the connections open now, for good (a partition that outlives them), while new
   * connections follow the mode: the case of a peer host that vanished without a FIN or RST.
   */
  freezeOpenLinks(): void;
  /** Called on every client chunk while set; undefined return = forward as is. */
  intercept(fn: Interceptor | undefined): void;
  /** Open client connections. */
  openConnections(): number;
  /** Resolves once no connection is open (at once if none is). */
  whenNoConnections(): Promise<void>;
  /** Resolves once every chunk `slow` held back has been delivered (at once if none is held). */
  whenDelivered(): Promise<void>;
  /** Connections accepted since start. */
  readonly accepted: number;
  close(): Promise<void>;
}

interface LinkState extends Link {
  held: { toTarget: Buffer[]; toClient: Buffer[] };
  /** Target chunks `slow` holds back, in order, each with the time it may leave. */
  late: Array<{ at: number; chunk: Buffer }>;
  lateTimer: NodeJS.Timeout | undefined;
  dropReplies: boolean;
  frozen: boolean;
  closed: boolean;
}

export async function startFaultProxy(
  target: { host: string; port: number },
  initial: FaultMode = 'pass',
  options: { slowMs?: number } = {},
): Promise<FaultProxy> {
  let mode: FaultMode = initial;
  let slowMs = options.slowMs ?? 500;
  let interceptor: Interceptor | undefined;
  let accepted = 0;
  let nextId = 1;
  const links = new Set<LinkState>();
  let emptyWaiters: Array<() => void> = [];
  let deliveredWaiters: Array<() => void> = [];
  let server: Server | undefined;
  let port = 0;
  const host = '127.0.0.1';

  const kill = (link: LinkState) => {
    if (link.closed) return;
    link.closed = true;
    clearTimeout(link.lateTimer);
    link.late = [];
    links.delete(link);
    wakeDelivered();
    if (links.size === 0 && emptyWaiters.length > 0) {
      const waiters = emptyWaiters;
      emptyWaiters = [];
      for (const wake of waiters) wake();
    }
    link.client.resetAndDestroy();
    link.target.resetAndDestroy();
  };

  const deliver = (link: LinkState, direction: 'toTarget' | 'toClient', chunk: Buffer) => {
    if (link.closed) return;
    const out = direction === 'toTarget' ? link.target : link.client;
    if (link.frozen) return;
    if (mode === 'blackhole') {
      link.held[direction].push(chunk);
      return;
    }
    if (direction === 'toClient' && (mode === 'slow' || link.late.length > 0)) {
      // In order: each chunk leaves slowMs after it arrived (at once after `slow` ended), never
      // before the previous one.
      link.late.push({ at: mode === 'slow' ? Date.now() + slowMs : 0, chunk });
      if (link.lateTimer === undefined) releaseLate(link);
      return;
    }
    out.write(chunk);
  };

  const releaseLate = (link: LinkState) => {
    link.lateTimer = undefined;
    while (link.late.length > 0 && link.late[0]!.at <= Date.now()) {
      const { chunk } = link.late.shift()!;
      if (!link.closed) link.client.write(chunk);
    }
    if (link.late.length > 0 && !link.closed) {
      link.lateTimer = setTimeout(() => releaseLate(link), Math.max(0, link.late[0]!.at - Date.now()));
      return;
    }
    link.late = [];
    wakeDelivered();
  };
  const wakeDelivered = () => {
    if (deliveredWaiters.length === 0 || ![...links].every((l) => l.late.length === 0)) return;
    const waiters = deliveredWaiters;
    deliveredWaiters = [];
    for (const wake of waiters) wake();
  };

  const onConnection = (client: Socket) => {
    accepted++;
    client.setNoDelay(true);
    if (mode === 'reset') {
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    const targetSocket = createConnection({ host: target.host, port: target.port });
    targetSocket.setNoDelay(true);
    const link: LinkState = {
      id: nextId++,
      client,
      target: targetSocket,
      clientBytes: 0,
      targetBytes: 0,
      held: { toTarget: [], toClient: [] },
      late: [],
      lateTimer: undefined,
      dropReplies: false,
      frozen: false,
      closed: false,
    };
    links.add(link);
    const end = () => kill(link);
    client.on('error', end);
    targetSocket.on('error', end);
    client.on('close', end);
    targetSocket.on('close', end);
    client.on('data', (chunk: Buffer) => {
      link.clientBytes += chunk.length;
      const decision = interceptor?.(chunk, link);
      if (!decision) {
        deliver(link, 'toTarget', chunk);
        return;
      }
      if (decision.forward.length > 0) deliver(link, 'toTarget', decision.forward);
      if (decision.then === 'cut') {
        // Let the forwarded bytes reach the target first, then reset both sides.
        if (decision.forward.length > 0) targetSocket.write(Buffer.alloc(0), () => setImmediate(() => kill(link)));
        else kill(link);
      } else if (decision.then === 'drop-replies') link.dropReplies = true;
    });
    targetSocket.on('data', (chunk: Buffer) => {
      link.targetBytes += chunk.length;
      if (link.dropReplies) return;
      deliver(link, 'toClient', chunk);
    });
  };

  async function listen(onPort: number): Promise<void> {
    const s = createServer({ noDelay: true }, onConnection);
    s.listen(onPort, host);
    await once(s, 'listening');
    server = s;
    port = (s.address() as AddressInfo).port;
  }

  async function stopListening(): Promise<void> {
    const s = server;
    server = undefined;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  await listen(0);
  if (initial === 'down') await stopListening();

  const proxy: FaultProxy = {
    host,
    get port() {
      return port;
    },
    url(scheme, path = '') {
      return `${scheme}://${host}:${port}${path}`;
    },
    get mode() {
      return mode;
    },
    get accepted() {
      return accepted;
    },
    async setMode(next, opts = {}) {
      if (opts.slowMs !== undefined) slowMs = opts.slowMs;
      const previous = mode;
      mode = next;
      if (next === 'down') {
        for (const link of [...links]) kill(link);
        await stopListening();
        return;
      }
      if (next === 'reset') for (const link of [...links]) kill(link);
      if (previous === 'down' && !server) {
        // Same port again, as a restarted server would: the clients reconnect to the address they know.
        await listen(port);
      }
      if (previous === 'blackhole' && next !== 'blackhole') {
        for (const link of links) {
          const { toTarget, toClient } = link.held;
          link.held = { toTarget: [], toClient: [] };
          for (const c of toTarget) deliver(link, 'toTarget', c);
          for (const c of toClient) if (!link.dropReplies) deliver(link, 'toClient', c);
        }
      }
    },
    resetAll() {
      for (const link of [...links]) kill(link);
    },
    freezeOpenLinks() {
      for (const link of links) link.frozen = true;
    },
    intercept(fn) {
      interceptor = fn;
    },
    openConnections() {
      return links.size;
    },
    whenNoConnections() {
      return links.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => emptyWaiters.push(resolve));
    },
    whenDelivered() {
      return [...links].every((l) => l.late.length === 0)
        ? Promise.resolve()
        : new Promise<void>((resolve) => deliveredWaiters.push(resolve));
    },
    async close() {
      interceptor = undefined;
      for (const link of [...links]) kill(link);
      await stopListening();
    },
  };
  return proxy;
}

/** host/port of a redis:// or http:// URL. */
export function addressOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}
