// The command line of mcp-bearer-proxy (bin/mcp-bearer-proxy.js routes here for `admin`, `token` and
// `help`; anything else starts the sidecar, src/main.ts):
//
//   mcp-bearer-proxy admin <operation> [--flags] [--json]   every admin operation, over the admin listener
//   mcp-bearer-proxy token generate                        a new 64-hex secret (e.g. a new master token)
//   mcp-bearer-proxy token hash <token | ->                SHA-256 of a token, for revocation by hand
//
// The master token comes from BEARER_SECRET_MASTER or, on a terminal, a prompt that does not echo; never
// from a flag (flags end up in shell history and in `ps`). Exit codes are EXIT below.

import { fileURLToPath } from 'node:url';
import { generateToken, hashToken, isTokenShaped } from './credentials.ts';

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

type FlagType = 'string' | 'integer' | 'list';

interface FlagSpec {
  field: string;
  type: FlagType;
  help: string;
  /** `-` as the value reads it from stdin (a secret stays out of `ps` and shell history). */
  stdin?: boolean;
}

interface OperationSpec {
  summary: string;
  flags: Record<string, FlagSpec>;
  /** Flag aliases: alias -> flag. */
  aliases?: Record<string, string>;
  render?: (body: any) => string;
}

/** Every admin operation (a test checks this against src/admin/operations.ts) and its flags. */
export const OPERATIONS: Readonly<Record<string, OperationSpec>> = {
  createClient: {
    summary: 'create an OAuth client; its secret is shown once',
    flags: {
      'client-name': { field: 'clientName', type: 'string', help: 'a name for people' },
      'redirect-uris': { field: 'redirectUris', type: 'list', help: 'redirect URIs (repeat the flag, or comma-separate)' },
      'grant-types': { field: 'grantTypes', type: 'list', help: 'e.g. client_credentials,refresh_token (default: from the profile)' },
      scope: { field: 'scope', type: 'string', help: 'space-separated scopes the client may ask for' },
      profile: { field: 'profile', type: 'string', help: 'token profile (default: default)' },
      'token-endpoint-auth-method': { field: 'tokenEndpointAuthMethod', type: 'string', help: 'client_secret_basic, client_secret_post or none' },
    },
    aliases: { name: 'client-name', 'redirect-uri': 'redirect-uris', 'grant-type': 'grant-types' },
  },
  listClients: {
    summary: 'list OAuth clients (no secrets)',
    flags: {},
    render: (body: { clients: Array<Record<string, unknown>> }) =>
      table(
        ['CLIENT ID', 'NAME', 'SOURCE', 'PROFILE', 'GRANTS', 'CREATED', 'REVOKED'],
        body.clients.map((c) => [c.clientId, c.clientName, c.source, c.profile, (c.grantTypes as string[]).join(','), time(c.createdAt), time(c.revokedAt)]),
      ),
  },
  deleteClient: {
    summary: 'revoke a client and every token it has, atomically',
    flags: { 'client-id': { field: 'clientId', type: 'string', help: 'the client (required)' } },
  },
  seedDefaultProfiles: {
    summary: 'create the default token profiles that do not exist yet',
    flags: {},
    render: (body: { created: string[]; profiles: Array<Record<string, unknown>> }) =>
      `created: ${body.created.length > 0 ? body.created.join(', ') : '(none, all existed)'}\n` +
      table(
        ['PROFILE', 'ACCESS TTL (s)', 'REFRESH TTL (s)', 'GRANTS'],
        body.profiles.map((p) => [p.name, p.accessTokenLifetimeSeconds, p.refreshTokenLifetimeSeconds, (p.grantTypes as string[]).join(',')]),
      ),
  },
  createAccessToken: {
    summary: 'issue an OAuth access token for a client; shown once',
    flags: {
      'client-id': { field: 'clientId', type: 'string', help: 'the client (required)' },
      'lifetime-seconds': { field: 'lifetimeSeconds', type: 'integer', help: '1 to 31536000 (required)' },
      scope: { field: 'scope', type: 'string', help: 'space-separated scopes' },
    },
  },
  revokeUserToken: {
    summary: 'revoke a user-grade token, by the token or its SHA-256',
    flags: {
      token: { field: 'token', type: 'string', help: 'the token; `-` reads it from stdin (keeps it out of ps)', stdin: true },
      'token-hash': { field: 'tokenHash', type: 'string', help: 'its SHA-256 (see `token hash`)' },
    },
  },
  explainPolicy: {
    summary: 'dry run of the per-tool policy: what a call with this token would get, and which rule decides',
    flags: {
      token: { field: 'token', type: 'string', help: 'the token; `-` reads it from stdin (keeps it out of ps)', stdin: true },
      'token-hash': { field: 'tokenHash', type: 'string', help: 'its SHA-256 (see `token hash`)' },
      method: { field: 'method', type: 'string', help: 'the JSON-RPC method, e.g. tools/call (required)' },
      name: { field: 'name', type: 'string', help: 'the tool or prompt name, or the resource URI' },
    },
    render: (body: { effect: string; decidedBy: string; rule?: string; reason: string; scope?: string }) =>
      `${body.effect.toUpperCase()}: ${body.reason}${body.scope ? `\nstep-up: a token with scope "${body.scope}" would be allowed` : ''}\n`,
  },
  listAuditEvents: {
    summary: 'the newest audit events, newest first',
    flags: { count: { field: 'count', type: 'integer', help: 'how many, 1 to 1000 (default 100)' } },
    render: (body: { events: Array<Record<string, unknown>> }) =>
      table(
        ['TIME', 'WHO', 'ACTION', 'RESULT', 'CLIENT', 'TOKEN', 'DETAIL'],
        body.events.map((e) => [
          time(e.at),
          e.who,
          e.action,
          e.result,
          e.clientId,
          e.tokenHashPrefix ?? e.subject,
          e.detail === undefined ? '' : Object.entries(e.detail as Record<string, unknown>).map(([k, v]) => `${k}=${String(v)}`).join(' '),
        ]),
      ),
  },
};

const FORBIDDEN_FLAGS = new Set(['master-token', 'caller-token', 'callerToken', 'masterToken', 'bearer-secret-master', 'secret']);

class UsageError extends Error {}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** `create-client`, `createClient` and `createclient` all name createClient. */
function operationName(arg: string): string | undefined {
  const wanted = arg.replace(/-/g, '').toLowerCase();
  return Object.keys(OPERATIONS).find((name) => name.toLowerCase() === wanted);
}

function time(value: unknown): string {
  return typeof value === 'number' ? new Date(value).toISOString().replace(/\.\d{3}Z$/, 'Z') : '';
}

function table(header: string[], rows: unknown[][]): string {
  if (rows.length === 0) return '(none)\n';
  const text = rows.map((r) => r.map((c) => (c === undefined || c === null ? '' : String(c))));
  const widths = header.map((h, i) => Math.max(h.length, ...text.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return `${[line(header), ...text.map(line)].join('\n')}\n`;
}

/** `key: value` lines; timestamps also as ISO, secrets flagged as shown once. */
function keyValues(body: Record<string, unknown>): string {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    let text = Array.isArray(value) ? value.join(', ') : typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
    if (key.endsWith('At') && typeof value === 'number') text += `  (${time(value)})`;
    if (key === 'clientSecret' || key === 'accessToken') text += '  (shown once: store it now)';
    lines.push(`${key}: ${text}`);
  }
  return `${lines.join('\n')}\n`;
}

export const USAGE = `usage:
  mcp-bearer-proxy [--config FILE] [--check-config]     run the sidecar (see README)
  mcp-bearer-proxy admin <operation> [flags] [--json]  call an admin operation
  mcp-bearer-proxy token generate                      print a new 64-hex secret (32 CSPRNG bytes)
  mcp-bearer-proxy token hash <token | ->              print SHA-256(token); - reads it from stdin
  mcp-bearer-proxy admin <operation> --help            the flags of one operation

admin operations:
${Object.entries(OPERATIONS)
  .map(([name, spec]) => `  ${kebab(name).padEnd(24)} ${spec.summary}`)
  .join('\n')}

admin environment:
  ADMIN_URL              the admin listener (default http://127.0.0.1:$ADMIN_PORT, port ${DEFAULT_ADMIN_PORT})
  BEARER_SECRET_MASTER   the master token; when unset, asked for on the terminal (never a flag)

  --admin-url URL        instead of ADMIN_URL
  --json                 print the sidecar's JSON answer as it is

exit codes: 0 done, 1 refused by the sidecar (4xx), 2 usage or no master token, 3 master token
refused (401), 4 admin listener unreachable or 5xx (e.g. Redis down), 130 interrupted
`;

function operationUsage(name: string): string {
  const spec = OPERATIONS[name]!;
  const heads = Object.entries(spec.flags).map(([flag, f]) => `  --${flag} ${f.type === 'list' ? 'A,B' : f.type === 'integer' ? 'N' : 'VALUE'}`);
  const width = Math.max(36, ...heads.map((h) => h.length + 2));
  const flags = Object.values(spec.flags).map((f, i) => heads[i]!.padEnd(width) + f.help);
  const aliases = Object.entries(spec.aliases ?? {}).map(([a, f]) => `--${a} = --${f}`);
  return `usage: mcp-bearer-proxy admin ${kebab(name)} [flags] [--json]\n\n${spec.summary}\n${flags.length > 0 ? `\n${flags.join('\n')}\n` : ''}${aliases.length > 0 ? `\naliases: ${aliases.join(', ')}\n` : ''}`;
}

interface ParsedAdmin {
  name: string;
  body: Record<string, unknown>;
  json: boolean;
  adminUrl: string | undefined;
  help: boolean;
  stdinFields: string[];
}

export function parseAdminArgs(args: string[]): ParsedAdmin {
  const [opArg, ...rest] = args;
  if (opArg === undefined || opArg === '--help' || opArg === '-h') throw new UsageError('name an operation');
  const name = operationName(opArg);
  if (name === undefined) throw new UsageError(`unknown admin operation "${opArg}"`);
  const spec = OPERATIONS[name]!;
  const parsed: ParsedAdmin = { name, body: {}, json: false, adminUrl: undefined, help: false, stdinFields: [] };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument "${arg}" (flags are --name value)`);
    const eq = arg.indexOf('=');
    let flag = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const inline = eq === -1 ? undefined : arg.slice(eq + 1);
    if (flag === 'json') {
      parsed.json = true;
      continue;
    }
    if (flag === 'help') {
      parsed.help = true;
      continue;
    }
    if (FORBIDDEN_FLAGS.has(flag)) {
      throw new UsageError('the master token is never taken from a flag (it would be kept in shell history and shown by ps): set BEARER_SECRET_MASTER, or run on a terminal to be asked for it');
    }
    const takeValue = (): string => {
      if (inline !== undefined) return inline;
      const next = rest[i + 1];
      if (next === undefined || (next.startsWith('--') && next !== '-')) throw new UsageError(`--${flag} needs a value`);
      i++;
      return next;
    };
    if (flag === 'admin-url') {
      parsed.adminUrl = takeValue();
      continue;
    }
    flag = spec.aliases?.[flag] ?? flag;
    const f = spec.flags[flag];
    if (f === undefined) {
      const known = Object.keys(spec.flags).map((k) => `--${k}`);
      throw new UsageError(`unknown flag --${flag} for ${kebab(name)}${known.length > 0 ? ` (its flags: ${known.join(', ')})` : ' (it takes no flags)'}`);
    }
    const raw = takeValue();
    if (f.type === 'integer') {
      if (!/^-?\d+$/.test(raw)) throw new UsageError(`--${flag} must be an integer (got "${raw}")`);
      parsed.body[f.field] = Number(raw);
    } else if (f.type === 'list') {
      const list = (parsed.body[f.field] as string[] | undefined) ?? [];
      list.push(...raw.split(',').map((s) => s.trim()).filter(Boolean));
      parsed.body[f.field] = list;
    } else {
      if (parsed.body[f.field] !== undefined) throw new UsageError(`--${flag} given twice`);
      if (raw === '-' && f.stdin) parsed.stdinFields.push(f.field);
      parsed.body[f.field] = raw;
    }
  }
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
      throw new UsageError('BEARER_SECRET_MASTER is not set and there is no terminal to ask for the master token on: export BEARER_SECRET_MASTER');
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
    const why = (err as Error).name === 'TimeoutError' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : (cause?.code ?? cause?.message ?? (err as Error).message);
    io.stderr.write(`mcp-bearer-proxy: cannot reach the admin listener at ${base} (${why}). Is the sidecar running? Set ADMIN_URL to its admin address.\n`);
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
      const render = OPERATIONS[parsed.name]!.render;
      io.stdout.write(render ? render(body) : keyValues(body as Record<string, unknown>));
    }
    return EXIT.ok;
  }
  const error = body && typeof body.error === 'string' ? `${body.error}${body.error_description ? `: ${body.error_description}` : ''}` : text.slice(0, 200);
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
      throw new UsageError(`not a token: expected 64 lowercase hex characters (got ${token.length} characters${/[A-F]/.test(token) ? ', with uppercase letters' : ''})`);
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
      if (rest.length === 0 || rest[0] === '--help' || rest[0] === '-h') {
        io.stdout.write(USAGE);
        return rest.length === 0 ? EXIT.usage : EXIT.ok;
      }
      return await runAdmin(rest, io);
    }
    if (command === 'token') return await runToken(rest, io);
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

// `node src/cli.ts ...` runs it directly too.
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

