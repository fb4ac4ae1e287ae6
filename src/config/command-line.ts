// Command lines, read by node:util `parseArgs` (its tokens, not its strict mode) so that each command
// words its own problems: the sidecar's `--<key> VALUE` flags (flags.ts) and the admin CLI's
// operation flags (src/entry/cli.ts) share this reading.
//
// Rules for every command: `--flag VALUE` and `--flag=VALUE` are the same; a value that starts with
// `--` is taken as a missing value (`--client-id --json`), while `-` alone is a value; an unknown
// flag's separate value belongs to it (`--proxy.prot 3` is one problem, not two).

import { parseArgs } from 'node:util';

export interface FlagOption {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
}

export type ArgvItem =
  /** A declared flag; `value` is undefined when a string flag has none (a boolean flag has one only as `--flag=x`). */
  | { kind: 'flag'; name: string; arg: string; value: string | undefined }
  /** A flag nobody declared, with the argument as written and the value that came with it. */
  | { kind: 'unknown'; name: string; arg: string; value: string | undefined }
  /** Anything else, including `--` itself. */
  | { kind: 'positional'; arg: string };

/** The arguments in order, each as a declared flag, an unknown flag or a positional argument. */
export function scanArgs(args: readonly string[], options: Readonly<Record<string, FlagOption>>): ArgvItem[] {
  const { tokens } = parseArgs({ args: [...args], options: { ...options }, strict: false, allowPositionals: true, tokens: true });
  const items: ArgvItem[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    const arg = args[token.index]!;
    if (token.kind === 'positional') items.push({ kind: 'positional', arg: token.value });
    else if (token.kind === 'option-terminator') items.push({ kind: 'positional', arg });
    else if (Object.hasOwn(options, token.name)) {
      const value = token.inlineValue === false && token.value?.startsWith('--') ? undefined : token.value;
      items.push({ kind: 'flag', name: token.name, arg, value });
    } else {
      let value = token.value;
      const next = tokens[i + 1];
      if (value === undefined && next?.kind === 'positional' && next.index === token.index + 1) {
        value = next.value;
        i++;
      }
      items.push({ kind: 'unknown', name: token.name, arg, value });
    }
  }
  return items;
}
