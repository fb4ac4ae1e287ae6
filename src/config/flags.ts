// The sidecar's command line: `--config FILE`, `--check-config`, `--skip-network-checks`, `--help`, and
// `--<dotted key> VALUE` for every configuration key but the secrets (read by command-line.ts).

import { scanArgs, type FlagOption } from './command-line.ts';
import { CONFIG_KEYS } from './keys.ts';
import { keysOf, nearestKey, nearestName } from './spec.ts';

/** Command-line values (`--proxy.port 0`), by dotted key; they win over the environment and the file. */
export type ConfigFlags = ReadonlyMap<string, string>;

/** The flag of every key that may be given on the command line (secrets may not). */
export function configFlagNames(): string[] {
  return keysOf(CONFIG_KEYS)
    .filter(([, spec]) => !spec.doc.secret)
    .map(([key]) => key);
}

/** The sidecar's own flags, besides the configuration keys. */
const COMMAND_FLAGS = {
  config: { type: 'string' },
  'check-config': { type: 'boolean' },
  'skip-network-checks': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Record<string, FlagOption>;

export interface CommandLine {
  configPath: string | undefined;
  checkOnly: boolean;
  skipNetworkChecks: boolean;
  help: boolean;
  flags: Map<string, string>;
  problems: string[];
}

/**
 * Reads `--<key> VALUE` and `--<key>=VALUE` for every declared key (e.g. `--proxy.port 0`), and, with
 * `commands`, the sidecar's own flags. An unknown flag (with the nearest known one), a missing value or
 * a secret's flag is a problem.
 */
function readCommandLine(argv: readonly string[], commands: boolean): CommandLine {
  const out: CommandLine = {
    configPath: undefined,
    checkOnly: false,
    skipNetworkChecks: false,
    help: false,
    flags: new Map(),
    problems: [],
  };
  const allowed = new Set(configFlagNames());
  // Secrets are declared too, so that their value is taken with them and never reported on its own.
  const options: Record<string, FlagOption> = Object.fromEntries(
    keysOf(CONFIG_KEYS).map(([key]) => [key, { type: 'string' } as FlagOption]),
  );
  if (commands) Object.assign(options, COMMAND_FLAGS);
  for (const item of scanArgs(argv, options)) {
    if (item.kind === 'flag' && commands && Object.hasOwn(COMMAND_FLAGS, item.name)) {
      const { type } = COMMAND_FLAGS[item.name as keyof typeof COMMAND_FLAGS];
      if (type === 'string') {
        if (item.value === undefined) out.problems.push(`--${item.name} needs a file path`);
        else out.configPath = item.value;
      } else if (item.value !== undefined) out.problems.push(`--${item.name} takes no value`);
      else if (item.name === 'check-config') out.checkOnly = true;
      else if (item.name === 'skip-network-checks') out.skipNetworkChecks = true;
      else out.help = true;
    } else if (item.kind === 'flag' && allowed.has(item.name)) {
      if (item.value === undefined) out.problems.push(`--${item.name} needs a value`);
      else out.flags.set(item.name, item.value);
    } else if (item.kind === 'flag') {
      out.problems.push(
        `--${item.name}: a secret is never taken from a flag (it would be kept in shell history and shown by ps); set it in the environment`,
      );
    } else {
      let near: string | undefined;
      if (item.kind === 'unknown') {
        const key = nearestKey(item.name, CONFIG_KEYS, '');
        near = key !== undefined && allowed.has(key) ? key : commands ? nearestName(item.name, Object.keys(COMMAND_FLAGS)) : undefined;
      }
      out.problems.push(`unknown argument "${item.arg}"${near !== undefined ? ` (did you mean --${near}?)` : ''}`);
    }
  }
  return out;
}

/** The sidecar's whole command line (src/entry/main.ts). */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  return readCommandLine(argv, true);
}

/** The configuration keys' flags alone. */
export function parseConfigFlags(argv: readonly string[]): { flags: Map<string, string>; problems: string[] } {
  const { flags, problems } = readCommandLine(argv, false);
  return { flags, problems };
}
