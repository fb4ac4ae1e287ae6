// The admin CLI's argument parsing: operation names in any spelling, typed flags and aliases, the
// master token never taken from a flag, and a clear usage error for everything else.

import { describe, expect, it } from 'vitest';
import { OPERATIONS, parseAdminArgs } from '../../src/cli.ts';
import { adminOperations } from '../../src/admin/operations.ts';

describe('parseAdminArgs', () => {
  it.each(['create-client', 'createClient', 'createclient', 'CREATE-CLIENT'])('%s names createClient', (name) => {
    expect(parseAdminArgs([name]).name).toBe('createClient');
  });

  it('names exactly the operations the admin listener has', () => {
    expect(Object.keys(OPERATIONS).sort()).toEqual(Object.keys(adminOperations).sort());
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
      body: { clientName: 'ci bot', redirectUris: ['https://a.example/cb', 'https://b.example/cb', 'https://c.example/cb'], grantTypes: ['client_credentials'] },
      json: true,
      adminUrl: undefined,
      help: false,
      stdinFields: [],
    });
    expect(parseAdminArgs(['create-access-token', '--client-id', 'mcp_1', '--lifetime-seconds=3600']).body).toEqual({ clientId: 'mcp_1', lifetimeSeconds: 3600 });
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
    ['an unknown flag, listing the known ones', ['delete-client', '--id', 'x'], /unknown flag --id for delete-client \(its flags: --client-id\)/],
    ['a flag of an operation without flags', ['list-clients', '--count', '1'], /unknown flag --count for list-clients \(it takes no flags\)/],
    ['a missing value', ['delete-client', '--client-id'], /--client-id needs a value/],
    ['a flag where the value should be', ['delete-client', '--client-id', '--json'], /--client-id needs a value/],
    ['a non-integer', ['create-access-token', '--lifetime-seconds', '1h'], /--lifetime-seconds must be an integer \(got "1h"\)/],
    ['a float', ['list-audit-events', '--count', '1.5'], /--count must be an integer/],
    ['a string flag twice', ['delete-client', '--client-id', 'a', '--client-id', 'b'], /--client-id given twice/],
  ])('%s is a usage error', (_label, args, message) => {
    expect(() => parseAdminArgs(args)).toThrow(message);
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
