// The admin CLI's argument parsing: operation names in any spelling, typed flags and aliases, the
// master token never taken from a flag, and a clear usage error for everything else. Flags, help and
// the checks of each value come from the operations' declarations (src/admin/declarations.ts), the
// same ones the admin listener reads a body against.

import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { EXIT, operationUsage, parseAdminArgs, runCli, USAGE } from '../../src/entry/cli.ts';
import { adminOperations, type AdminContext } from '../../src/admin/operations.ts';
import { ADMIN_OPERATIONS, type OperationName } from '../../src/admin/declarations.ts';
import { flagOf, kebab, type Fields, type OperationSpec } from '../../src/admin/spec.ts';
import { HttpError } from '../../src/http/errors.ts';

const NAMES = Object.keys(ADMIN_OPERATIONS) as OperationName[];

function fieldsOf(name: OperationName): Array<[string, Fields[string]]> {
  return Object.entries(ADMIN_OPERATIONS[name].fields as Fields);
}

/** A body every declared rule accepts: each required field at its smallest, the first of each exactly-one pair. */
function validBody(name: OperationName): Record<string, unknown> {
  const spec = ADMIN_OPERATIONS[name] as OperationSpec;
  const body: Record<string, unknown> = {};
  for (const [field, f] of fieldsOf(name)) {
    if (!f.required) continue;
    body[field] = f.type === 'integer' ? Number(/^(\d+)\.\./.exec(f.bounds ?? '')?.[1] ?? 1) : 'x';
  }
  for (const [a] of spec.exactlyOne ?? []) body[a] = 'a'.repeat(64);
  for (const [a] of spec.atLeastOne ?? []) body[a] = 'x';
  return body;
}

class Accepted extends Error {}
/** A context whose first use means the body was accepted: the handler has begun to act. */
const ACCEPTING = new Proxy({} as AdminContext, {
  get() {
    throw new Accepted();
  },
});

/**
 * What the admin listener's operation (the one it calls for `POST /oauth/<name>`) says of `body`: its 400
 * description, or undefined when the body passed and the handler began to act.
 */
async function httpProblem(name: OperationName, body: Record<string, unknown>): Promise<string | undefined> {
  try {
    await adminOperations[name]!(ACCEPTING, body);
  } catch (err) {
    if (err instanceof Accepted) return undefined;
    if (err instanceof HttpError && err.status === 400) return err.description;
    throw err;
  }
  throw new Error('the operation acted without its context');
}

/** The CLI's usage error for the same values given as flags. */
function cliProblem(name: OperationName, body: Record<string, unknown>): string | undefined {
  const fields = ADMIN_OPERATIONS[name].fields as Fields;
  const args = Object.entries(body).flatMap(([field, value]) => [`--${flagOf(field, fields[field]!)}`, String(value)]);
  try {
    parseAdminArgs([kebab(name), ...args]);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

async function runInProcess(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const stdin = new PassThrough();
  stdin.end();
  const code = await runCli(argv, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    stdin,
    env: {},
  });
  return { code, stdout, stderr };
}

describe('parseAdminArgs', () => {
  it.each(['create-client', 'createClient', 'createclient', 'CREATE-CLIENT'])('%s names createClient', (name) => {
    expect(parseAdminArgs([name]).name).toBe('createClient');
  });

  it('names exactly the operations the admin listener serves: both come from the declarations', () => {
    expect(Object.keys(adminOperations)).toEqual(NAMES);
    for (const name of NAMES) expect(parseAdminArgs([kebab(name), '--help']).name).toBe(name);
  });

  it('every declared flag and alias is unique in its operation, and none is a common or forbidden flag', () => {
    for (const name of NAMES) {
      const flags = fieldsOf(name).flatMap(([field, f]) => [flagOf(field, f), ...(f.doc.aliases ?? [])]);
      expect(new Set(flags).size, name).toBe(flags.length);
      for (const flag of flags) expect(['json', 'help', 'admin-url', 'master-token', 'caller-token', 'secret']).not.toContain(flag);
    }
  });

  it('reads string, list and integer flags, inline or separate, with aliases', () => {
    expect(
      parseAdminArgs([
        'create-client',
        '--name',
        'ci bot',
        '--redirect-uri=https://a.example/cb',
        '--redirect-uris',
        'https://b.example/cb, https://c.example/cb',
        '--grant-type',
        'client_credentials',
        '--json',
      ]),
    ).toEqual({
      name: 'createClient',
      body: {
        clientName: 'ci bot',
        redirectUris: ['https://a.example/cb', 'https://b.example/cb', 'https://c.example/cb'],
        grantTypes: ['client_credentials'],
      },
      json: true,
      adminUrl: undefined,
      help: false,
      stdinFields: [],
    });
    expect(parseAdminArgs(['create-access-token', '--client-id', 'mcp_1', '--lifetime-seconds=3600']).body).toEqual({
      clientId: 'mcp_1',
      lifetimeSeconds: 3600,
    });
    expect(parseAdminArgs(['list-clients', '--admin-url', 'http://127.0.0.1:9'])).toMatchObject({ adminUrl: 'http://127.0.0.1:9' });
    expect(parseAdminArgs(['list-clients', '--help'])).toMatchObject({ help: true });
  });

  it('`-` as a secret flag value reads it from stdin (never from the command line)', () => {
    expect(parseAdminArgs(['revoke-user-token', '--token', '-'])).toMatchObject({ body: { token: '-' }, stdinFields: ['token'] });
    expect(parseAdminArgs(['revoke-user-token', '--token=-'])).toMatchObject({ stdinFields: ['token'] });
    // Only flags that allow it: elsewhere `-` is just a value.
    expect(parseAdminArgs(['delete-client', '--client-id', '-'])).toMatchObject({ body: { clientId: '-' }, stdinFields: [] });
  });

  it.each<[string, string[], RegExp]>([
    ['no operation', [], /name an operation/],
    ['--help instead of an operation', ['--help'], /name an operation/],
    ['an unknown operation', ['drop-database'], /unknown admin operation "drop-database"/],
    ['a positional argument', ['list-clients', 'extra'], /unexpected argument "extra"/],
    [
      'an unknown flag, listing the known ones',
      ['delete-client', '--id', 'x'],
      /unknown flag --id for delete-client \(its flags: --client-id\)/,
    ],
    [
      'a flag of an operation without flags',
      ['list-clients', '--count', '1'],
      /unknown flag --count for list-clients \(it takes no flags\)/,
    ],
    ['a missing value', ['delete-client', '--client-id'], /--client-id needs a value/],
    ['a flag where the value should be', ['delete-client', '--client-id', '--json'], /--client-id needs a value/],
    ['a non-integer', ['create-access-token', '--lifetime-seconds', '1h'], /--lifetime-seconds must be an integer \(got "1h"\)/],
    ['a float', ['list-audit-events', '--count', '1.5'], /--count must be an integer/],
    ['a string flag twice', ['delete-client', '--client-id', 'a', '--client-id', 'b'], /--client-id given twice/],
  ])('%s is a usage error', (_label, args, message) => {
    expect(() => parseAdminArgs(args)).toThrow(message);
  });

  it('a JSON field takes JSON text (createClient --jwks)', () => {
    const jwks = { keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }] };
    expect(
      parseAdminArgs(['create-client', '--token-endpoint-auth-method', 'private_key_jwt', '--jwks', JSON.stringify(jwks)]).body,
    ).toEqual({ tokenEndpointAuthMethod: 'private_key_jwt', jwks });
    expect(() => parseAdminArgs(['create-client', '--jwks', 'keys'])).toThrow(/^--jwks must be JSON text$/);
    expect(() => parseAdminArgs(['create-client', '--jwks', '[1]'])).toThrow(/^--jwks must be a JSON Web Key Set of 1 to 32 public keys$/);
  });

  it('a did-you-mean for a misspelt operation or flag', () => {
    expect(() => parseAdminArgs(['create-acess-token'])).toThrow(
      'unknown admin operation "create-acess-token" (did you mean create-access-token?)',
    );
    expect(() => parseAdminArgs(['delete-client', '--clientid', 'x'])).toThrow(
      'unknown flag --clientid for delete-client (did you mean --client-id?)',
    );
    expect(() => parseAdminArgs(['list-audit-events', '--cout', '3'])).toThrow(
      'unknown flag --cout for list-audit-events (did you mean --count?)',
    );
  });

  it('exactly one of --token and --token-hash, checked as the admin listener checks token and tokenHash', async () => {
    const hash = 'a'.repeat(64);
    expect(() => parseAdminArgs(['revoke-user-token'])).toThrow(/^--token or --token-hash is required$/);
    expect(() => parseAdminArgs(['revoke-user-token', '--token', hash, '--token-hash', hash])).toThrow(
      /^give either --token or --token-hash, not both$/,
    );
    expect(await httpProblem('revokeUserToken', {})).toBe('token or tokenHash is required');
    expect(await httpProblem('revokeUserToken', { token: hash, tokenHash: hash })).toBe('give either token or tokenHash, not both');
    expect(() => parseAdminArgs(['explain-policy', '--token-hash', 'ABC', '--method', 'tools/call'])).toThrow(
      /^--token-hash must be 64 lowercase hex characters$/,
    );
  });

  it.each(['--master-token', '--master-token=x', '--caller-token', '--masterToken', '--bearer-secret-master', '--secret'])(
    '%s is refused: the master token never comes from a flag',
    (flag) => {
      const secret = 'c0ffee'.repeat(10);
      let message = '';
      try {
        parseAdminArgs(['list-clients', flag.includes('=') ? flag.replace('=x', `=${secret}`) : flag, secret]);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/the master token is never taken from a flag/);
      expect(message).not.toContain(secret);
    },
  );
});

describe('a field declared with bounds', () => {
  const bounded = NAMES.flatMap((name) =>
    fieldsOf(name)
      .filter(([, f]) => f.type === 'integer')
      .map(([field, f]) => [name, field, f] as const),
  );

  it('there are some (lifetimeSeconds, count)', () => {
    expect(bounded.map(([, field]) => field)).toEqual(expect.arrayContaining(['lifetimeSeconds', 'count']));
  });

  it.each(bounded)('%s %s: refused over HTTP and by the CLI with the same message, naming the field as written', async (name, field, f) => {
    const [min, max] = /^(\d+)\.\.(\d+)/.exec(f.bounds!)!.slice(1).map(Number) as [number, number];
    const flag = `--${flagOf(field, f)}`;
    expect(await httpProblem(name, validBody(name))).toBeUndefined();
    expect(cliProblem(name, validBody(name))).toBeUndefined();
    for (const value of [min - 1, max + 1]) {
      const body = { ...validBody(name), [field]: value };
      const overHttp = await httpProblem(name, body);
      expect(overHttp).toBe(`${field} must be an integer from ${min} to ${max}`);
      expect(cliProblem(name, body)).toBe(overHttp!.replace(field, flag));
    }
  });
});

describe('help, from the declarations', () => {
  it('`admin <operation> --help` shows every field: its flag, description, bounds, whether required, and the aliases', () => {
    for (const name of NAMES) {
      const help = operationUsage(name);
      expect(help).toContain(`admin ${kebab(name)} `);
      expect(help).toContain(ADMIN_OPERATIONS[name].description);
      for (const [field, f] of fieldsOf(name)) {
        const line = help.split('\n').find((l) => l.startsWith(`  --${flagOf(field, f)} `));
        expect(line, `${name}.${field}`).toBeDefined();
        expect(line).toContain(f.doc.description);
        if (f.bounds) expect(line).toContain(f.bounds);
        expect(line!.includes('required')).toBe(f.required);
        for (const alias of f.doc.aliases ?? []) expect(help).toContain(`--${alias} = --${flagOf(field, f)}`);
      }
    }
    expect(operationUsage('createAccessToken')).toMatch(/^ {2}--lifetime-seconds N +its lifetime in seconds \(1\.\.31536000, required\)$/m);
    expect(operationUsage('revokeUserToken')).toContain('exactly one of --token, --token-hash');
  });

  it('the usage lists every operation with its description', () => {
    for (const name of NAMES) expect(USAGE).toContain(`  ${kebab(name).padEnd(24)} ${ADMIN_OPERATIONS[name].description}`);
  });

  it("`admin help` is the usage, `admin help <operation>` that operation's help (exit 0)", async () => {
    expect(await runInProcess(['admin', 'help'])).toEqual({ code: EXIT.ok, stdout: USAGE, stderr: '' });
    expect(await runInProcess(['admin', 'help', 'list-audit-events'])).toEqual({
      code: EXIT.ok,
      stdout: operationUsage('listAuditEvents'),
      stderr: '',
    });
    expect(await runInProcess(['admin', 'create-access-token', '--help'])).toEqual({
      code: EXIT.ok,
      stdout: operationUsage('createAccessToken'),
      stderr: '',
    });
  });

  it('a bound is a usage error before any master token is asked for (exit 2)', async () => {
    const run = await runInProcess(['admin', 'list-audit-events', '--count', '0']);
    expect(run.code).toBe(EXIT.usage);
    expect(run.stderr).toContain('--count must be an integer from 1 to 1000');
    expect(run.stderr).not.toContain('BEARER_SECRET_MASTER');
  });
});
