// Command-line flags for configuration keys: `--<dotted key> VALUE` for every key but the secrets.

import { CONFIG_KEYS } from './config-keys.ts';
import { keysOf, nearestKey } from './config-spec.ts';

/** Command-line values (`--proxy.port 0`), by dotted key; they win over the environment and the file. */
export type ConfigFlags = ReadonlyMap<string, string>;

/** The flag of every key that may be given on the command line (secrets may not). */
export function configFlagNames(): string[] {
  return keysOf(CONFIG_KEYS)
    .filter(([, spec]) => !spec.doc.secret)
    .map(([key]) => key);
}

/**
 * Reads `--<key> VALUE` and `--<key>=VALUE` for every declared key (e.g. `--proxy.port 0`). An unknown
 * flag (with the nearest known one), a missing value or a secret's flag is a problem.
 */
export function parseConfigFlags(argv: readonly string[]): { flags: Map<string, string>; problems: string[] } {
  const flags = new Map<string, string>();
  const problems: string[] = [];
  const allowed = new Set(configFlagNames());
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq === -1 ? undefined : eq) : '';
    if (allowed.has(name)) {
      const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
      if (value === undefined) problems.push(`--${name} needs a value`);
      else flags.set(name, value);
    } else if (keysOf(CONFIG_KEYS).some(([key]) => key === name)) {
      problems.push(`--${name}: a secret is never taken from a flag (it would be kept in shell history and shown by ps); set it in the environment`);
      if (eq === -1) i++;
    } else {
      const near = name === '' ? undefined : nearestKey(name, CONFIG_KEYS, '');
      // `--proxy.prot 3`: the 3 belongs to the misspelt flag, not a second problem.
      if (name !== '' && eq === -1 && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--')) i++;
      problems.push(`unknown argument "${arg}"${near !== undefined && allowed.has(near) ? ` (did you mean --${near}?)` : ''}`);
    }
  }
  return { flags, problems };
}
