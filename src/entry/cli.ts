// The command line of mcp-bearer-proxy (bin/mcp-bearer-proxy.js routes here for `admin`, `token` and
// `help`; anything else starts the sidecar, src/entry/main.ts):
//
//   mcp-bearer-proxy admin <operation> [--flags] [--json]   every admin operation, over the admin listener
//   mcp-bearer-proxy token generate                        a new 64-hex secret (e.g. a new master token)
//   mcp-bearer-proxy token hash <token | ->                SHA-256 of a token, for revocation by hand
//   mcp-bearer-proxy migrate [--finish] [--config FILE]     the store brought over to the current key layout
//
// Each operation's flags, help and value checks come from its declaration (src/admin/declarations.ts),
// the one the admin listener reads a body against.
//
// The master token comes from BEARER_SECRET_MASTER or, on a terminal, a prompt that does not echo; never
// from a flag (flags end up in shell history and in `ps`). Exit codes are EXIT below.

import { fileURLToPath } from 'node:url';
import { ADMIN_OPERATIONS, type OperationName } from '../admin/declarations.ts';
import { keyValues } from '../admin/render.ts';
import { flagOf, kebab, readArguments, type Field, type Fields, type OperationSpec } from '../admin/spec.ts';
import { scanArgs, type FlagOption } from '../config/command-line.ts';
import { nearestName } from '../config/spec.ts';
import { generateToken, hashToken, isTokenShaped } from '../model/credentials.ts';
import { runMigrate } from './migrate.ts';

export const EXIT = {
  /** Done. */
  ok: 0,
  /** The sidecar refused the request (400, 404, 405, 413, ...): the message says why. */
  refused: 1,
  /** Usage: unknown command or flag, a bad value, no master token to use. */
  usage: 2,
  /** The master token was refused (401). */
  unauthorized: 3,
  /** The admin listener cannot be reached, timed out, or answered 5xx (e.g. Redis down: 503). */
  unavailable: 4,
  /** Interrupted at the prompt (Ctrl-C). */
  interrupted: 130,
} as const;

const DEFAULT_ADMIN_PORT = 8081;
const REQUEST_TIMEOUT_MS = 30_000;

export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown; isTTY?: boolean };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };
  env: NodeJS.ProcessEnv;
}

const FORBIDDEN_FLAGS = new Set(['master-token', 'caller-token', 'callerToken', 'masterToken', 'bearer-secret-master', 'secret']);

class UsageError extends Error {}

/** The flags every operation takes besides its fields. */
const COMMON_FLAGS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'admin-url': { type: 'string' },
} as const satisfies Record<string, FlagOption>;

/** `create-client`, `createClient` and `createclient` all name createClient. */
function operationName(arg: string): OperationName | undefined {
  const wanted = arg.replace(/-/g, '').toLowerCase();
  return (Object.keys(ADMIN_OPERATIONS) as OperationName[]).find((name) => name.toLowerCase() === wanted);
}

function fieldsOf(name: OperationName): Array<[field: string, spec: Field<unknown>]> {
  return Object.entries(ADMIN_OPERATIONS[name].fields as Fields);
}

/** Each flag of an operation (aliases too), with the field it sets. */
function flagsOf(name: OperationName): Map<string, { field: string; spec: Field<unknown> }> {
  const flags = new Map<string, { field: string; spec: Field<unknown> }>();
  for (const [field, spec] of fieldsOf(name)) {
    for (const flag of [flagOf(field, spec), ...(spec.doc.aliases ?? [])]) flags.set(flag, { field, spec });
  }
  return flags;
}

/** How a field's flag is named in a problem: `lifetimeSeconds` -> `--lifetime-seconds`. */
function flagLabel(name: OperationName): (field: string) => string {
  const fields = ADMIN_OPERATIONS[name].fields as Fields;
  return (field) => `--${flagOf(field, fields[field]!)}`;
}

export const USAGE = `usage:
  mcp-bearer-proxy [--config FILE] [--check-config]     run the sidecar (see README)
  mcp-bearer-proxy admin <operation> [flags] [--json]  call an admin operation
  mcp-bearer-proxy token generate                      print a new 64-hex secret (32 CSPRNG bytes)
  mcp-bearer-proxy token hash <token | ->              print SHA-256(token); - reads it from stdin
  mcp-bearer-proxy migrate [--finish] [--config FILE]  bring the store over to the current key layout
  mcp-bearer-proxy admin <operation> --help            the flags of one operation (or: admin help <operation>)

admin operations:
${Object.entries(ADMIN_OPERATIONS)
  .map(([name, spec]) => `  ${kebab(name).padEnd(24)} ${spec.description}`)
  .join('\n')}

admin environment:
  ADMIN_URL              the admin listener (default http://127.0.0.1:$ADMIN_PORT, port ${DEFAULT_ADMIN_PORT})
  BEARER_SECRET_MASTER   the master token; when unset, asked for on the terminal (never a flag)

  --admin-url URL        instead of ADMIN_URL
  --json                 print the sidecar's JSON answer as it is

exit codes: 0 done, 1 refused by the sidecar (4xx), 2 usage or no master token, 3 master token
refused (401), 4 admin listener unreachable or 5xx (e.g. Redis down), 130 interrupted
`;

const PLACEHOLDER = { string: 'VALUE', integer: 'N', list: 'A,B', json: 'JSON' } as const;

/** `--flag` help: its description, then bounds and whether it is required. */
function flagHelp(spec: Field<unknown>): string {
  const details = [spec.bounds, spec.required ? 'required' : undefined].filter(Boolean);
  return `${spec.doc.description}${details.length > 0 ? ` (${details.join(', ')})` : ''}`;
}

/** One operation's help, from its declaration. */
export function operationUsage(name: OperationName): string {
  const spec = ADMIN_OPERATIONS[name] as OperationSpec;
  const fields = fieldsOf(name);
  const heads = fields.map(([field, f]) => `  --${flagOf(field, f)} ${PLACEHOLDER[f.type]}`);
  const width = Math.max(36, ...heads.map((h) => h.length + 2));
  const flags = fields.map(([, f], i) => heads[i]!.padEnd(width) + flagHelp(f));
  const label = flagLabel(name);
  const groups = [
    ...(spec.exactlyOne ?? []).map(([a, b]) => `exactly one of ${label(a)}, ${label(b)}`),
    ...(spec.atLeastOne ?? []).map(([a, b]) => `at least one of ${label(a)}, ${label(b)}`),
  ];
  const aliases = fields.flatMap(([field, f]) => (f.doc.aliases ?? []).map((a) => `--${a} = --${flagOf(field, f)}`));
  return [
    `usage: mcp-bearer-proxy admin ${kebab(name)} [flags] [--json]\n\n${spec.description}\n`,
    flags.length > 0 ? `\n${flags.join('\n')}\n` : '',
    groups.length > 0 ? `\n${groups.join('\n')}\n` : '',
    aliases.length > 0 ? `\naliases: ${aliases.join(', ')}\n` : '',
  ].join('');
}

interface ParsedAdmin {
  name: OperationName;
  body: Record<string, unknown>;
  json: boolean;
  adminUrl: string | undefined;
  help: boolean;
  stdinFields: string[];
}

/** The body read against the operation's declaration, as the admin listener will: a problem is a usage error. */
export function checkAdminBody(name: OperationName, body: Record<string, unknown>): void {
  const read = readArguments(ADMIN_OPERATIONS[name] as OperationSpec, body, flagLabel(name));
  if (!read.ok) throw new UsageError(read.problem);
}

export function parseAdminArgs(args: string[]): ParsedAdmin {
  const [opArg, ...rest] = args;
  if (opArg === undefined || opArg === '--help' || opArg === '-h') throw new UsageError('name an operation');
  const name = operationName(opArg);
  if (name === undefined) {
    const near = nearestName(opArg, Object.keys(ADMIN_OPERATIONS).map(kebab));
    throw new UsageError(`unknown admin operation "${opArg}"${near !== undefined ? ` (did you mean ${near}?)` : ''}`);
  }
  const flags = flagsOf(name);
  const options: Record<string, FlagOption> = { ...COMMON_FLAGS };
  for (const flag of flags.keys()) options[flag] = { type: 'string' };
  const parsed: ParsedAdmin = { name, body: {}, json: false, adminUrl: undefined, help: false, stdinFields: [] };
  for (const item of scanArgs(rest, options)) {
    if (item.kind === 'positional') throw new UsageError(`unexpected argument "${item.arg}" (flags are --name value)`);
    const written = `${item.arg.startsWith('--') ? '--' : '-'}${item.name}`;
    if (item.kind === 'unknown') {
      if (FORBIDDEN_FLAGS.has(item.name)) {
        throw new UsageError(
          'the master token is never taken from a flag (it would be kept in shell history and shown by ps): set BEARER_SECRET_MASTER, or run on a terminal to be asked for it',
        );
      }
      const known = fieldsOf(name).map(([field, spec]) => flagOf(field, spec));
      const near = nearestName(item.name, [...flags.keys(), ...Object.keys(COMMON_FLAGS)]);
      const hint =
        near !== undefined
          ? `did you mean --${near}?`
          : known.length > 0
            ? `its flags: ${known.map((k) => `--${k}`).join(', ')}`
            : 'it takes no flags';
      throw new UsageError(`unknown flag ${written} for ${kebab(name)} (${hint})`);
    }
    if (item.name === 'json' || item.name === 'help') {
      if (item.value !== undefined) throw new UsageError(`${written} takes no value`);
      parsed[item.name] = true;
      continue;
    }
    if (item.value === undefined) throw new UsageError(`${written} needs a value`);
    if (item.name === 'admin-url') {
      parsed.adminUrl = item.value;
      continue;
    }
    const { field, spec } = flags.get(item.name)!;
    const raw = item.value;
    if (spec.type === 'integer') {
      if (!/^-?\d+$/.test(raw)) throw new UsageError(`${written} must be an integer (got "${raw}")`);
      parsed.body[field] = Number(raw);
    } else if (spec.type === 'json') {
      if (parsed.body[field] !== undefined) throw new UsageError(`${written} given twice`);
      try {
        parsed.body[field] = JSON.parse(raw) as unknown;
      } catch {
        throw new UsageError(`${written} must be JSON text`);
      }
    } else if (spec.type === 'list') {
      const values = (parsed.body[field] as string[] | undefined) ?? [];
      values.push(
        ...raw
          .split(',')
          .map((v) => v.trim())
          .filter(Boolean),
      );
      parsed.body[field] = values;
    } else {
      if (parsed.body[field] !== undefined) throw new UsageError(`${written} given twice`);
      if (raw === '-' && spec.doc.stdin) parsed.stdinFields.push(field);
      parsed.body[field] = raw;
    }
  }
  // A value still to come from stdin is checked once it is read (runAdmin).
  if (!parsed.help && parsed.stdinFields.length === 0) checkAdminBody(name, parsed.body);
  return parsed;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  stream.setEncoding('utf8');
  for await (const chunk of stream) text += chunk as string;
  return text;
}

class Interrupted extends Error {}

/** Reads a line from the terminal without echoing it. */
function promptHidden(io: CliIo, question: string): Promise<string> {
  const input = io.stdin;
  io.stderr.write(question);
  input.setRawMode!(true);
  input.setEncoding('utf8');
  input.resume();
  return new Promise((resolve, reject) => {
    let value = '';
    const finish = () => {
      input.setRawMode!(false);
      input.pause();
      input.off('data', onData);
      io.stderr.write('\n');
    };
    const onData = (chunk: string | Buffer) => {
      for (const ch of String(chunk)) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') {
          finish();
          resolve(value);
          return;
        }
        if (ch === '\u0003') {
          finish();
          reject(new Interrupted());
          return;
        }
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    input.on('data', onData);
  });
}

async function masterToken(io: CliIo): Promise<string> {
  let token = io.env.BEARER_SECRET_MASTER;
  if (token === undefined || token === '') {
    if (!io.stdin.isTTY || typeof io.stdin.setRawMode !== 'function') {
      throw new UsageError(
        'BEARER_SECRET_MASTER is not set and there is no terminal to ask for the master token on: export BEARER_SECRET_MASTER',
      );
    }
    token = (await promptHidden(io, 'master token (input hidden): ')).trim();
  }
  if (!isTokenShaped(token)) {
    throw new UsageError(`the master token must be exactly 64 lowercase hex characters (the one given has ${token.length} characters)`);
  }
  return token;
}

function adminBaseUrl(io: CliIo, flag: string | undefined): string {
  const url = flag ?? io.env.ADMIN_URL ?? `http://127.0.0.1:${io.env.ADMIN_PORT || DEFAULT_ADMIN_PORT}`;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http');
  } catch {
    throw new UsageError(`ADMIN_URL "${url}" is not an http:// or https:// URL`);
  }
  return url.replace(/\/+$/, '');
}

async function runAdmin(args: string[], io: CliIo): Promise<number> {
  const parsed = parseAdminArgs(args);
  if (parsed.help) {
    io.stdout.write(operationUsage(parsed.name));
    return EXIT.ok;
  }
  const base = adminBaseUrl(io, parsed.adminUrl);
  const token = await masterToken(io);
  if (parsed.stdinFields.length > 0) {
    const text = (await readAll(io.stdin)).trim();
    for (const field of parsed.stdinFields) parsed.body[field] = text;
    checkAdminBody(parsed.name, parsed.body);
  }
  const url = `${base}/oauth/${parsed.name}`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(parsed.body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why =
      (err as Error).name === 'TimeoutError'
        ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`
        : (cause?.code ?? cause?.message ?? (err as Error).message);
    io.stderr.write(
      `mcp-bearer-proxy: cannot reach the admin listener at ${base} (${why}). Is the sidecar running? Set ADMIN_URL to its admin address.\n`,
    );
    return EXIT.unavailable;
  }
  const text = await res.text();
  let body: any;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (parsed.json && body !== undefined) io.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  if (res.ok) {
    if (!parsed.json) {
      const render = (ADMIN_OPERATIONS[parsed.name] as OperationSpec).render;
      io.stdout.write(render ? render(body) : keyValues(body as Record<string, unknown>));
    }
    return EXIT.ok;
  }
  const error =
    body && typeof body.error === 'string'
      ? `${body.error}${body.error_description ? `: ${body.error_description}` : ''}`
      : text.slice(0, 200);
  if (res.status === 401) {
    io.stderr.write(`mcp-bearer-proxy: the master token was refused by ${base} (401 ${error}). Check BEARER_SECRET_MASTER.\n`);
    return EXIT.unauthorized;
  }
  io.stderr.write(`mcp-bearer-proxy: ${kebab(parsed.name)} failed: ${res.status} ${error}\n`);
  return res.status >= 500 ? EXIT.unavailable : EXIT.refused;
}

async function runToken(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'generate' && rest.length === 0) {
    io.stdout.write(`${generateToken()}\n`);
    return EXIT.ok;
  }
  if (sub === 'hash' && rest.length === 1) {
    const token = rest[0] === '-' ? (await readAll(io.stdin)).trim() : rest[0]!;
    if (!isTokenShaped(token)) {
      throw new UsageError(
        `not a token: expected 64 lowercase hex characters (got ${token.length} characters${/[A-F]/.test(token) ? ', with uppercase letters' : ''})`,
      );
    }
    io.stdout.write(`${hashToken(token)}\n`);
    return EXIT.ok;
  }
  throw new UsageError('token commands: `token generate`, `token hash <token>`, `token hash -` (reads stdin)');
}

/** Runs one command line (without `node` and the script); resolves with the exit code. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
      io.stdout.write(USAGE);
      return command === undefined ? EXIT.usage : EXIT.ok;
    }
    if (command === 'admin') {
      if (rest.length === 0 || rest[0] === '--help' || rest[0] === '-h' || (rest[0] === 'help' && rest.length === 1)) {
        io.stdout.write(USAGE);
        return rest.length === 0 ? EXIT.usage : EXIT.ok;
      }
      // `admin help <operation>` is `admin <operation> --help`.
      if (rest[0] === 'help') return await runAdmin([...rest.slice(1), '--help'], io);
      return await runAdmin(rest, io);
    }
    if (command === 'token') return await runToken(rest, io);
    if (command === 'migrate') return await runMigrate(rest, io);
    throw new UsageError(`unknown command "${command}"`);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`mcp-bearer-proxy: ${err.message}\nRun \`mcp-bearer-proxy --help\` for usage.\n`);
      return EXIT.usage;
    }
    if (err instanceof Interrupted) return EXIT.interrupted;
    throw err;
  }
}

/** The process entry: real stdio, real environment. */
export async function main(argv: string[] = process.argv.slice(2)): Promise<number> {
  return runCli(argv, { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });
}

// `node src/entry/cli.ts ...` runs it directly too.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`mcp-bearer-proxy: unexpected failure: ${(err as Error).message}\n`);
      process.exitCode = 1;
    },
  );
}
