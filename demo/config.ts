// The demo's configuration (`npm run demo`): the same flags, config file and environment as `npm start`,
// except what makes it the demo. Its own upstream, its own identity provider and the in-memory store
// are forced, whatever the file or the environment say; the master token is generated unless the
// environment or the file gives one. A config file is read only when named (--config FILE or
// $MCP_AUTH_CONFIG): the repository's config.yaml is the production template (Redis, every
// interface), so the demo never picks it up by itself. It listens on loopback unless told otherwise.

import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parseCommandLine, type ConfigFlags } from '../src/config/flags.ts';
import { buildConfig, ConfigError, interpolate, type Config } from '../src/config/load.ts';

/** Keys only the demo decides: a flag naming one is refused; the file and the environment are overridden. */
export const DEMO_OWN = ['store', 'upstream.url', 'idp'];

export const DEMO_USAGE = `usage: npm run demo -- [--config FILE] [--<key> VALUE ...]
  the same configuration keys, flags, file and environment as npm start (docs/configuration.md),
  except store, upstream.url and idp.* (the demo's own), e.g.
    npm run demo -- --oauth.profiles.interactive.accessTokenLifetimeSeconds 60 --oauth.refreshReuseGraceSeconds 30`;

/** Where the demo's configuration comes from: its command line, and the file it names. */
export interface DemoConfigInput {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  /** What only the demo decides: its upstream, its identity provider (when it could start one), its master token. */
  upstreamUrl: string;
  idp?: { issuer: string; clientId: string; clientSecret: string };
  generatedMasterToken: string;
}

/**
 * The demo's configuration: demo defaults (loopback, warn), under the named file, under the
 * environment, under the flags, under what only the demo decides. Problems throw ConfigError, as
 * for npm start; a bad command line throws too (`help`: --help was asked).
 */
export function demoConfig(input: DemoConfigInput): Config | 'help' {
  const line = parseCommandLine(input.argv);
  if (line.help) return 'help';
  const problems = [...line.problems];
  if (line.checkOnly || line.skipNetworkChecks)
    problems.push('--check-config is for npm start; the demo checks its own configuration as it starts');
  for (const key of line.flags.keys()) {
    if (DEMO_OWN.some((own) => key === own || key.startsWith(`${own}.`)))
      problems.push(`--${key}: the demo uses its own ${key} (${DEMO_OWN.join(', ')} are the demo's); run npm start to choose it`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const path = line.configPath ?? (input.env.MCP_AUTH_CONFIG || undefined);
  let file: Record<string, unknown> = {};
  if (path !== undefined) {
    let parsed: unknown;
    try {
      parsed = parseYaml(readFileSync(path, 'utf8')) ?? {};
    } catch (err) {
      throw new ConfigError([
        `cannot read config file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message.split('\n')[0]}`,
      ]);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new ConfigError([`config file ${path} must contain a YAML mapping`]);
    file = interpolate(parsed, input.env) as Record<string, unknown>;
  }
  const fileProxy = (file.proxy ?? {}) as Record<string, unknown>;
  const fileAdmin = (file.admin ?? {}) as Record<string, unknown>;
  const tree = {
    logLevel: 'warn',
    ...file,
    proxy: { host: '127.0.0.1', ...fileProxy },
    admin: { host: '127.0.0.1', ...fileAdmin },
  };
  // Forced: set as the strongest overrides (flags), so neither the file nor the environment moves them.
  const forced = new Map<string, string>(line.flags);
  forced.set('store', 'memory');
  forced.set('upstream.url', input.upstreamUrl);
  if (input.idp) {
    forced.set('idp.issuer', input.idp.issuer);
    forced.set('idp.clientId', input.idp.clientId);
    forced.set('idp.clientSecret', input.idp.clientSecret);
  }
  // A master token the environment or the file gives is used; otherwise one is generated for this run.
  if (!input.env.BEARER_SECRET_MASTER && !(typeof file.masterToken === 'string' && file.masterToken !== ''))
    forced.set('masterToken', input.generatedMasterToken);
  return buildConfig(tree, input.env, forced as ConfigFlags);
}
