// `npm start`: load and validate the config, connect the store, then open the two listeners.
// Any configuration or start-up problem is one paragraph on stderr and exit code 2, before a port opens.

import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { configFlagNames, parseCommandLine, type ConfigFlags } from '../config/flags.ts';
import { ConfigError, loadConfig, type Config } from '../config/load.ts';
import { createSidecar, exitOnStopSignals, openStore } from '../app.ts';
import { systemClock } from '../model/clock.ts';
import { createLogger, writeStdoutLines } from '../observability/logger.ts';
import { checkTracingInstalled, TracingUnavailableError } from '../observability/tracing.ts';
import { checkIdentityProvider } from '../oauth/idp-check.ts';
import { ensureLayout } from '../store/layout.ts';
import { RedisConnectError } from '../store/redis-connection.ts';
import { RedisTokenStore } from '../store/redis.ts';
import { LookupCacheSetupError } from '../store/redis-lookup-cache.ts';
import { redactRedisUrl } from '../store/redis-url.ts';
import { storedCredentialKeyProblem } from '../upstream-credentials/key-check.ts';
import { groupLogger, runPrimary, runWorker, workerCount } from './workers.ts';

const USAGE = `usage: mcp-bearer-proxy [--config FILE] [--check-config [--skip-network-checks]] [--<key> VALUE ...]

  --config FILE    YAML configuration (default: $MCP_AUTH_CONFIG, else ./config.yaml when present)
  --check-config   validate the configuration, the identity provider it names (discovery
                   document, keys, client credentials) and that Redis answers (within
                   redis.connectTimeoutMs) and, with upstream credentials on, that the store's kept
                   credentials are sealed under configured keys; report every problem, exit 0
                   (valid) or 2
  --skip-network-checks
                   with --check-config: the configuration alone, nothing fetched, Redis not reached
  --<key> VALUE    any configuration key but the master token (docs/configuration.md); it wins over
                   the environment and the file. Lists are comma-separated. The keys:
${wrap(
  configFlagNames().map((k) => `--${k}`),
  100,
  '                   ',
)}
`;

function wrap(words: string[], width: number, indent: string): string {
  const lines: string[] = [];
  let line = indent;
  for (const word of words) {
    if (line.length + word.length + 1 > width && line !== indent) {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += `${word} `;
  }
  return [...lines, line.trimEnd()].join('\n');
}

function fail(paragraph: string): never {
  process.stderr.write(`mcp-bearer-proxy: ${paragraph}\n`);
  process.exit(2);
}

interface Args {
  configPath: string | undefined;
  checkOnly: boolean;
  skipNetworkChecks: boolean;
  flags: ConfigFlags;
}

function parseArgs(argv: string[]): Args {
  const line = parseCommandLine(argv);
  if (line.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (line.problems.length > 0) fail(`${line.problems.join('; ')}.\n${USAGE.split('\n')[0]} (--help lists the keys)`);
  if (line.skipNetworkChecks && !line.checkOnly)
    fail(`--skip-network-checks goes with --check-config: at start-up the identity provider is always checked.\n${USAGE.split('\n')[0]}`);
  const configPath = line.configPath ?? (process.env.MCP_AUTH_CONFIG || (existsSync('config.yaml') ? 'config.yaml' : undefined));
  return { configPath, checkOnly: line.checkOnly, skipNetworkChecks: line.skipNetworkChecks, flags: line.flags };
}

async function main(): Promise<void> {
  const { configPath, checkOnly, skipNetworkChecks, flags } = parseArgs(process.argv.slice(2));
  let config: Config;
  try {
    config = loadConfig(configPath, process.env, flags);
  } catch (err) {
    if (err instanceof ConfigError) {
      fail(
        `the configuration${configPath ? ` (${configPath} + environment${flags.size > 0 ? ' + flags' : ''})` : ` (environment${flags.size > 0 ? ' + flags' : ''})`} is invalid, fix these and start again:\n${err.problems.map((p) => `  - ${p}`).join('\n')}`,
      );
    }
    throw err;
  }
  // Once per process group: the primary checks, its workers inherit the verdict.
  if (!cluster.isWorker) {
    try {
      await checkTracingInstalled(process.env);
    } catch (err) {
      if (err instanceof TracingUnavailableError) fail(err.message);
      throw err;
    }
  }
  if (!cluster.isWorker && !skipNetworkChecks) {
    const problems = await checkIdentityProvider(config);
    if (problems.length > 0) {
      fail(`the identity provider is not usable, and browser sign-in and the token exchange depend on it: ${problems.join('; ')}.`);
    }
  }
  if (checkOnly && !skipNetworkChecks) {
    const problem = await storeProblem(config);
    if (problem !== undefined) fail(problem);
  }
  if (checkOnly) {
    process.stdout.write(`configuration OK${configPath ? ` (${configPath})` : ''}\n`);
    process.exit(0);
  }

  // More than one worker: this process is the primary or one of its workers (src/entry/workers.ts).
  const workers = cluster.isWorker ? 1 : workerCount(config);
  const inGroup = cluster.isWorker || workers > 1;
  const logger = inGroup ? groupLogger(config) : createLogger(config.logLevel, undefined, config.logFormat);
  let store;
  try {
    store = await openStore(config, systemClock, logger);
  } catch (err) {
    fail(redisStartupProblem(config.redis.url, err));
  }
  // The key layout, checked once per process group before anything is served.
  if (!cluster.isWorker && store instanceof RedisTokenStore) {
    let layout;
    try {
      layout = await ensureLayout(store.client, store.keys);
    } catch (err) {
      await store.close();
      fail(redisStartupProblem(config.redis.url, err));
    }
    if (!layout.ok) {
      await store.close();
      fail(`Redis at ${redactRedisUrl(config.redis.url)}: ${layout.problem}`);
    }
  }
  if (cluster.isWorker) return runWorker(config, store, logger);
  if (workers > 1) {
    await runPrimary(config, store, logger, workers);
    return;
  }

  const sidecar = await createSidecar({ config, store, logger });
  let addresses;
  try {
    addresses = await sidecar.listen();
  } catch (err) {
    await store.close();
    process.stderr.write(`mcp-bearer-proxy: cannot open a listener: ${(err as Error).message}\n`);
    process.exit(1);
  }
  writeStdoutLines(`proxy listening on ${addresses.proxyUrl}\nadmin listening on ${addresses.adminUrl}\n`);
  // A warning, not a refusal: the upstream may start after the sidecar (compose, Kubernetes).
  void sidecar.probeMcpEndpoint();

  exitOnStopSignals(sidecar, logger);
}

/**
 * --check-config's look at the store, opened as start-up opens it (connected within
 * redis.connectTimeoutMs, the lookup cache set up) and answering a PING: a configuration whose Redis
 * does not answer would not start. It subscribes to revocation notices as start-up does (an ACL user
 * may be refused that), reads the layout start-up would check (writing nothing) and, with upstream
 * credentials on, which keys its records are sealed under. The first problem found, as one paragraph.
 */
async function storeProblem(config: Config): Promise<string | undefined> {
  try {
    const store = await openStore(config, systemClock, createLogger('error', undefined, config.logFormat));
    try {
      await store.ping();
      const unsubscribe = await store.subscribeRevocations({ revoked: () => undefined, missed: () => undefined });
      await unsubscribe();
      const layout = store instanceof RedisTokenStore ? await ensureLayout(store.client, store.keys, { write: false }) : undefined;
      if (layout !== undefined && !layout.ok) return `Redis at ${redactRedisUrl(config.redis.url)}: ${layout.problem}`;
      const opened = { listUpstreamCredentials: () => store.listUpstreamCredentials(), close: async () => {} };
      return await storedCredentialKeyProblem(config, () => Promise.resolve(opened));
    } finally {
      await store.close();
    }
  } catch (err) {
    return redisStartupProblem(config.redis.url, err);
  }
}

/**
 * One paragraph on an ACL user refused a command past the store's own checks (the plan script and the
 * lookup cache have theirs): most often the subscription to revocation notices.
 */
function aclRefusalProblem(message: string): string {
  return `Redis refused a command the sidecar needs (${message.slice(0, 200)}). With an ACL user, allow what docs/security.md lists, including SUBSCRIBE and PUBLISH on the channel <redis.keyPrefix>revocations, which revocation notices travel on.`;
}

/** One paragraph on why Redis could not be used at start-up, and what to change. */
function redisStartupProblem(url: string, err: unknown): string {
  const where = redactRedisUrl(url);
  const forms = '(redis://host:port, rediss://, redis+sentinel://, redis+cluster://)';
  if (err instanceof LookupCacheSetupError) return `Redis at ${where}: ${err.message}.`;
  const failure = err instanceof RedisConnectError ? err.failure : 'timeout';
  const why = err instanceof Error ? err.message : String(err);
  if (!(err instanceof RedisConnectError) && /\bNOPERM\b/.test(why)) return `Redis at ${where}: ${aclRefusalProblem(why)}`;
  if (failure === 'refused') {
    return `cannot reach Redis at ${where}: the connection was refused (${why}), so nothing listens there. Start Redis, or point REDIS_URL at a running one ${forms}; the sidecar never runs without its store.`;
  }
  if (failure === 'auth') {
    return `Redis at ${where} refused the sidecar's credentials (${why}). Put the password, and the ACL user if there is one, in REDIS_URL as redis://user:password@host:port (percent-encode special characters); the sidecar never runs without its store.`;
  }
  return `cannot reach Redis at ${where} (${why}). Start Redis or point REDIS_URL at a reachable one ${forms}; the sidecar never runs without its store.`;
}

main().catch((err: unknown) => {
  const message = (err as Error).message;
  // An ACL user refused a command after the checks above (the notices' subscription, made by createSidecar).
  if (/\bNOPERM\b/.test(message)) fail(aclRefusalProblem(message));
  process.stderr.write(`mcp-bearer-proxy: unexpected start-up failure: ${message}\n`);
  process.exit(1);
});
