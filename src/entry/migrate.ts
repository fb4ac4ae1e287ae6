// `mcp-bearer-proxy migrate [--finish] [--config FILE] [--<key> VALUE ...]`: brings the configured Redis
// store over to the current key layout (src/store/migrate.ts says how), prints what it moved, and
// exits 0; a configuration or store it cannot use is one paragraph on stderr and exit 2.

import { existsSync } from 'node:fs';
import { parseCommandLine } from '../config/flags.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import { CURRENT_LAYOUT } from '../store/key-layout.ts';
import { migrateLayout, type MigrationCounts } from '../store/migrate.ts';
import { keyLayout } from '../store/records.ts';
import { connectRedis, createRedisClient } from '../store/redis-connection.ts';
import { redactRedisUrl } from '../store/redis-url.ts';

export const MIGRATE_USAGE = `usage: mcp-bearer-proxy migrate [--finish] [--config FILE] [--<key> VALUE ...]

  Brings the store of redis.url (under redis.keyPrefix) from layout 1 to layout ${CURRENT_LAYOUT}, while
  sidecars serve: each record is merged into its new key (nothing overwritten), then the layout is
  recorded. Run it again at any time (after an interruption, or once the previous version's sidecars
  are gone, to pick up what they wrote meanwhile); --finish also deletes the layout-1 keys.
`;

interface Io {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: NodeJS.ProcessEnv;
}

/** The counts as printed: one line per family, then the totals. */
export function formatCounts(counts: MigrationCounts): string {
  const lines = Object.entries(counts).map(
    ([family, c]) =>
      `${family.padEnd(24)} scanned ${c.scanned}, copied ${c.copied}, merged ${c.merged}, unchanged ${c.unchanged}, removed ${c.removed}`,
  );
  const total = Object.values(counts).reduce((sum, c) => sum + c.copied + c.merged, 0);
  return `${lines.join('\n')}\nmoved ${total} records to layout ${CURRENT_LAYOUT}\n`;
}

export async function runMigrate(argv: string[], io: Io): Promise<number> {
  const finish = argv.includes('--finish');
  const line = parseCommandLine(argv.filter((a) => a !== '--finish'));
  if (line.help) {
    io.stdout.write(MIGRATE_USAGE);
    return 0;
  }
  if (line.problems.length > 0 || line.checkOnly || line.skipNetworkChecks) {
    io.stderr.write(`mcp-bearer-proxy migrate: ${[...line.problems, 'usage below'].join('; ')}\n${MIGRATE_USAGE}`);
    return 2;
  }
  const configPath = line.configPath ?? (io.env.MCP_AUTH_CONFIG || (existsSync('config.yaml') ? 'config.yaml' : undefined));
  let config;
  try {
    config = loadConfig(configPath, io.env, line.flags);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr.write(`mcp-bearer-proxy migrate: the configuration is invalid:\n${err.problems.map((p) => `  - ${p}`).join('\n')}\n`);
    return 2;
  }
  if (config.store !== 'redis') {
    io.stderr.write('mcp-bearer-proxy migrate: the configured store is the in-memory one: nothing to migrate.\n');
    return 2;
  }
  const redis = createRedisClient({
    url: config.redis.url,
    commandTimeoutMs: Math.max(config.redis.commandTimeoutMs, 10_000),
    connectTimeoutMs: config.redis.connectTimeoutMs,
  });
  redis.on('error', () => undefined); // reported through the failing command
  try {
    await connectRedis(redis, config.redis.connectTimeoutMs);
    const keys = keyLayout(config.redis.keyPrefix);
    const stored = await redis.get(keys.layout());
    if (stored !== null && stored !== String(CURRENT_LAYOUT)) {
      io.stderr.write(
        `mcp-bearer-proxy migrate: the store's layout is ${JSON.stringify(stored.slice(0, 40))}, not one this version brings over (1, or ${CURRENT_LAYOUT} already): nothing done.\n`,
      );
      return 2;
    }
    const counts = await migrateLayout(redis, keys, { finish, progress: (text) => io.stderr.write(`${text}\n`) });
    io.stdout.write(formatCounts(counts));
    return 0;
  } catch (err) {
    io.stderr.write(`mcp-bearer-proxy migrate: Redis at ${redactRedisUrl(config.redis.url)} failed: ${(err as Error).message}\n`);
    return 2;
  } finally {
    redis.disconnect();
  }
}
