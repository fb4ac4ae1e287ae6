// Worker processes (`proxy.workers` > 1): the primary forks N workers that share the proxy port
// (node:cluster) and serves the admin listener itself, with /metrics summed over every process and
// /readyz true only while all workers listen. Workers run the proxy listener only.
// Every process opens its own store connection; all state that must be shared lives in Redis.

import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Config } from '../config/load.ts';
import { MAX_WORKERS } from '../config/keys.ts';
import { createSidecar, exitOnStopSignals, type Sidecar } from '../app.ts';
import { createLogger, describe, writeStdoutLines, type Logger } from '../observability/logger.ts';
import type { TokenStore } from '../store/types.ts';
import { HttpError } from '../http/errors.ts';

/** How many proxy processes the config asks for: `0` is one per available CPU, at most MAX_WORKERS. */
export function workerCount(config: Config, cpus: number = availableParallelism()): number {
  return config.proxy.workers === 0 ? Math.min(cpus, MAX_WORKERS) : config.proxy.workers;
}

/** The logger of a process in the group: every line names its worker (`0` for the primary). */
export function groupLogger(config: Config): Logger {
  const logger = createLogger(config.logLevel, undefined, config.logFormat, true);
  return logger.child({ worker: cluster.isWorker ? cluster.worker!.id : 0 });
}

const METRICS_REQUEST = 'mcp-bearer-proxy:metrics';
const METRICS_REPLY = 'mcp-bearer-proxy:metrics-reply';
/** A scrape waits this long for every worker's metrics, then answers 503 rather than a partial sum. */
const SCRAPE_TIMEOUT_MS = 3000;
/** Restart back-off: doubles with each death in the last minute, up to the cap. */
const RESTART_BASE_MS = 100;
const RESTART_MAX_MS = 10_000;
const RESTART_WINDOW_MS = 60_000;
/** After the grace period, workers that have not exited get this long before SIGKILL. */
const EXIT_MARGIN_MS = 5000;

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** A worker process: the proxy listener only; it answers the primary's metrics requests. */
export async function runWorker(config: Config, store: TokenStore, logger: Logger): Promise<void> {
  const sidecar = await createSidecar({ config, store, logger });
  process.on('message', (message: { type?: string; id?: number }) => {
    if (message?.type !== METRICS_REQUEST) return;
    void sidecar.metrics.registry.getMetricsAsJSON().then((metrics) => process.send?.({ type: METRICS_REPLY, id: message.id, metrics }));
  });
  exitOnStopSignals(sidecar, logger);
  // A primary that is gone (killed) leaves no orphan: node:cluster exits a worker whose IPC channel closes.
  try {
    await sidecar.listenProxy();
  } catch (err) {
    logger.error({ err: describe(err) }, 'worker cannot open the proxy listener');
    await store.close();
    process.exit(1);
  }
}

/** The group's state as the primary keeps it. */
interface Group {
  readonly count: number;
  /** Workers whose proxy listener is open. */
  readonly listening: Set<number>;
  /** Workers that have listened at least once (a death before that is a start-up failure). */
  readonly started: Set<number>;
  deaths: number[];
  stopping: boolean;
  readonly restarts: Set<NodeJS.Timeout>;
}

/**
 * The primary: admin listener, N workers, restarts, and the group's graceful stop (on SIGTERM or
 * SIGINT). Resolves once every worker listens, with the two listeners' URLs (also printed).
 */
export async function runPrimary(
  config: Config,
  store: TokenStore,
  logger: Logger,
  count: number,
): Promise<{ proxyUrl: string; adminUrl: string }> {
  const group: Group = { count, listening: new Set(), started: new Set(), deaths: [], stopping: false, restarts: new Set() };
  let sidecar: Sidecar | undefined;
  const scrape = () => scrapeGroup(sidecar!, logger);
  const notReady = () => (group.listening.size < count ? `${group.listening.size} of ${count} workers listening` : undefined);
  sidecar = await createSidecar({ config, store, logger, admin: { scrape, notReady } });
  const adminUrl = await sidecar.listenAdmin().catch((err: unknown) => {
    process.stderr.write(`mcp-bearer-proxy: cannot open a listener: ${(err as Error).message}\n`);
    return store.close().then(() => process.exit(1));
  });
  const stopGroup = (signal: string, exitCode: number) => void stopAll(sidecar!, group, logger, signal, exitCode);
  cluster.on('exit', (worker, code, signal) => onWorkerExit(group, logger, worker, code, signal, stopGroup));
  // From here on (workers may be starting), a stop signal stops the group gracefully.
  process.on('SIGTERM', () => stopGroup('SIGTERM', 0));
  process.on('SIGINT', () => stopGroup('SIGINT', 0));
  const proxyUrl = await new Promise<string>((resolve) => {
    cluster.on('listening', (worker, address) => {
      group.listening.add(worker.id);
      group.started.add(worker.id);
      logger.info({ pid: worker.process.pid, listeningWorker: worker.id }, 'worker listening');
      if (group.listening.size === count)
        resolve(`http://${address.addressType === 6 ? `[${address.address}]` : address.address}:${address.port}`);
    });
    for (let i = 0; i < count; i++) forkWorker(logger);
  });
  writeStdoutLines(`proxy listening on ${proxyUrl}\nadmin listening on ${adminUrl}\n`);
  logger.info({ workers: count }, 'all workers listening');
  void sidecar.probeMcpEndpoint();
  return { proxyUrl, adminUrl };
}

function forkWorker(logger: Logger): Worker {
  const worker = cluster.fork();
  logger.info({ pid: worker.process.pid, startedWorker: worker.id }, 'worker started');
  return worker;
}

/**
 * A worker exited. While stopping: expected. Before it ever listened: a start-up failure (config,
 * Redis, the port), which restarting would only repeat: the group stops with its exit code. Otherwise
 * it died: restarted after a back-off that grows with the deaths of the last minute.
 */
function onWorkerExit(
  group: Group,
  logger: Logger,
  worker: Worker,
  code: number | null,
  signal: string | null,
  stopGroup: (signal: string, exitCode: number) => void,
): void {
  group.listening.delete(worker.id);
  if (group.stopping) return;
  if (!group.started.has(worker.id)) {
    logger.error({ exitedWorker: worker.id, code, signal }, 'worker failed at start-up: stopping every worker');
    stopGroup('worker start-up failure', code === null || code === 0 ? 1 : code);
    return;
  }
  group.started.delete(worker.id);
  const now = Date.now();
  group.deaths = [...group.deaths.filter((t) => now - t < RESTART_WINDOW_MS), now];
  const delayMs = Math.min(RESTART_BASE_MS * 2 ** (group.deaths.length - 1), RESTART_MAX_MS);
  logger.error({ exitedWorker: worker.id, code, signal, restartInMs: delayMs }, 'worker died: restarting it');
  const timer = setTimeout(() => {
    group.restarts.delete(timer);
    if (!group.stopping) forkWorker(logger);
  }, delayMs);
  group.restarts.add(timer);
}

/**
 * The group's graceful stop: every worker is sent SIGTERM and does its own graceful stop within
 * `proxy.shutdownGraceMs`; a worker still running after that and a margin is killed. Then the
 * primary closes its admin listener and store and exits: `exitCode`, or 1 when a worker had to be
 * killed or did not stop cleanly.
 */
async function stopAll(sidecar: Sidecar, group: Group, logger: Logger, reason: string, exitCode: number): Promise<void> {
  if (group.stopping) return;
  group.stopping = true;
  for (const timer of group.restarts) clearTimeout(timer);
  logger.info({ reason }, 'shutting down');
  const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
  let unclean = false;
  const exited = workers.map(
    (w) =>
      new Promise<void>((resolve) => {
        if (w.process.exitCode !== null || w.process.signalCode !== null) return resolve();
        w.process.once('exit', (code) => {
          if (code !== 0) unclean = true;
          resolve();
        });
        w.process.kill('SIGTERM');
      }),
  );
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), sidecar.config.proxy.shutdownGraceMs + EXIT_MARGIN_MS);
  });
  if ((await Promise.race([Promise.all(exited), bound])) === 'timeout') {
    unclean = true;
    logger.error('workers did not stop within the grace period: killing them');
    for (const w of workers) w.process.kill('SIGKILL');
    await Promise.all(exited);
  }
  clearTimeout(timer);
  try {
    await sidecar.shutdown(0);
  } catch (err) {
    logger.error({ err: describe(err) }, 'shutdown failed');
    unclean = true;
  }
  process.exit(exitCode !== 0 ? exitCode : unclean ? 1 : 0);
}

let nextScrape = 0;

/**
 * The primary's metrics summed with every connected worker's (prom-client's cluster aggregation). A
 * worker that does not answer in time (stopped, stuck) fails the scrape: a partial sum would look like
 * counters going backwards.
 */
async function scrapeGroup(sidecar: Sidecar, logger: Logger): Promise<string> {
  const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected());
  const id = nextScrape++;
  const replies = workers.map(
    (w) =>
      new Promise<MetricsJson>((resolve, reject) => {
        const timer = setTimeout(() => {
          w.off('message', onMessage);
          reject(new Error(`worker ${w.id} did not send its metrics within ${SCRAPE_TIMEOUT_MS} ms`));
        }, SCRAPE_TIMEOUT_MS);
        function onMessage(message: { type?: string; id?: number; metrics?: MetricsJson }) {
          if (message?.type !== METRICS_REPLY || message.id !== id) return;
          clearTimeout(timer);
          w.off('message', onMessage);
          resolve(message.metrics ?? []);
        }
        w.on('message', onMessage);
        w.send({ type: METRICS_REQUEST, id });
      }),
  );
  let all: MetricsJson[];
  try {
    all = await Promise.all([sidecar.metrics.registry.getMetricsAsJSON(), ...replies]);
  } catch (err) {
    logger.warn({ err: describe(err) }, 'metrics scrape failed: answering 503');
    throw new HttpError('temporarily_unavailable', 'a worker process did not send its metrics in time', { cause: err });
  }
  return AggregatorRegistry.aggregate(all).metrics();
}
