// Start-up configuration: load YAML -> interpolate ${VAR} / ${VAR:-default} -> apply the environment
// overrides and command-line flags -> validate everything at once -> freeze. Nothing is built from a
// config that has a single problem; every problem is reported together. Each key is declared once, in
// CONFIG_KEYS (keys.ts); rules across keys are in rules.ts, flags in flags.ts.

import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { ConfigFlags } from './flags.ts';
import { CONFIG_KEYS, type Config } from './keys.ts';
import { checkWhole } from './rules.ts';
import { keysOf, readTree, type Overrides, type Problems } from './spec.ts';
import { deepFreeze } from '../model/deep-freeze.ts';

export type { Config, LogFormat, LogLevel } from './keys.ts';

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Replaces ${VAR} and ${VAR:-default} in every string of a parsed YAML tree. Unset ${VAR} -> "". */
export function interpolate(value: unknown, env: NodeJS.ProcessEnv): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_, name: string, fallback?: string) => {
      const v = env[name];
      return v !== undefined && v !== '' ? v : (fallback ?? '');
    });
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env);
    return out;
  }
  return value;
}

/** Variables that win over the file, by dotted key. */
function environmentOverrides(env: NodeJS.ProcessEnv): Map<string, { value: string; label: string }> {
  const out = new Map<string, { value: string; label: string }>();
  for (const [key, spec] of keysOf(CONFIG_KEYS)) {
    const variable = spec.doc.env;
    const value = variable === undefined ? undefined : env[variable];
    if (variable !== undefined && value !== undefined && value !== '') out.set(key, { value, label: variable });
  }
  return out;
}

/** Validates a parsed config tree (after interpolation); throws ConfigError listing every problem. */
export function buildConfig(input: unknown, env: NodeJS.ProcessEnv = process.env, flags: ConfigFlags = new Map()): Config {
  const problems: Problems = [];
  const isMapping = input !== null && typeof input === 'object' && !Array.isArray(input);
  if (input !== null && input !== undefined && !isMapping) problems.push('the config file must contain a YAML mapping');
  const overrides: Overrides = new Map([
    ...environmentOverrides(env),
    ...[...flags].map(([key, value]) => [key, { value, label: `--${key}` }] as const),
  ]);
  const config = readTree(CONFIG_KEYS, isMapping ? (input as Record<string, unknown>) : {}, overrides, problems) as unknown as Config;
  checkWhole(config, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** Reads and validates the file; a missing or unparsable file is one more problem in the same list. */
export function loadConfig(path: string | undefined, env: NodeJS.ProcessEnv = process.env, flags: ConfigFlags = new Map()): Config {
  let tree: unknown = {};
  if (path !== undefined) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError([`cannot read config file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`]);
    }
    try {
      tree = parseYaml(text) ?? {};
    } catch (err) {
      throw new ConfigError([`config file ${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`]);
    }
    if (typeof tree !== 'object' || Array.isArray(tree)) throw new ConfigError([`config file ${path} must contain a YAML mapping`]);
  }
  return buildConfig(interpolate(tree, env), env, flags);
}
