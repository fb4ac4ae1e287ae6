// The configuration table of docs/configuration.md is generated from src/config/keys.ts (scripts/config-doc.ts)
// and must match it: a key added to the code without a description, or a table edited by hand, fails here.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { CONFIG_DOC, configTable, tableIn, withTable } from '../../scripts/config-doc.ts';
import { buildConfig } from '../../src/config/load.ts';
import { describeConfigKeys } from '../../src/config/keys.ts';
import { generateToken } from '../../src/model/credentials.ts';
import { ADMIN_OPERATIONS } from '../../src/admin/declarations.ts';
import { ADMIN_DOC, operationsTable, OPERATIONS_MARKERS } from '../../scripts/admin-doc.ts';
import { integer, operation } from '../../src/admin/spec.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const CONFIG_DOC_TEXT = read(CONFIG_DOC);
const ADMIN_DOC_TEXT = read(ADMIN_DOC);
const README = read('README.md');
const CONFIG_YAML = readFileSync(new URL('../../config.yaml', import.meta.url), 'utf8');

describe('configuration table', () => {
  it(`${CONFIG_DOC} holds exactly the generated table (run \`npm run docs:config\` to regenerate)`, () => {
    expect(tableIn(CONFIG_DOC_TEXT), `${CONFIG_DOC} configuration table is stale: run \`npm run docs:config\``).toBe(configTable());
  });

  it('README.md holds no second copy of the table, which nothing would keep up to date', () => {
    expect(README).not.toContain('<!-- config:start -->');
    expect(README).not.toContain('| `redis.commandTimeoutMs` |');
  });

  it('lists every key the code reads, with a description, and nothing else', () => {
    const keys = describeConfigKeys();
    expect(keys.length).toBeGreaterThan(30);
    expect(new Set(keys.map((k) => k.key)).size).toBe(keys.length);
    for (const k of keys) expect(k.description.length, k.key).toBeGreaterThan(10);
    // Spot checks against the code's real defaults.
    const config = buildConfig({ masterToken: generateToken() }, {});
    const byKey = new Map(keys.map((k) => [k.key, k]));
    expect(byKey.get('redis.commandTimeoutMs')).toMatchObject({ default: config.redis.commandTimeoutMs, type: 'integer 10..1500' });
    expect(byKey.get('admin.port')).toMatchObject({ default: 8081, env: 'ADMIN_PORT' });
    expect(byKey.get('audit.stream')).toMatchObject({ default: config.audit.stream, type: 'boolean' });
    expect(byKey.get('logLevel')?.default).toBe(config.logLevel);
  });

  it('names every environment override the documented interface promises, each on its key', () => {
    const promised = {
      BEARER_SECRET_MASTER: 'masterToken',
      REDIS_URL: 'redis.url',
      REDIS_LOOKUP_CACHE: 'redis.lookupCache',
      REDIS_LOOKUP_CACHE_MAX_ENTRIES: 'redis.lookupCacheMaxEntries',
      UPSTREAM_URL: 'upstream.url',
      UPSTREAM_ASSERTION: 'upstream.assertion',
      UPSTREAM_ASSERTION_AUDIENCE: 'upstream.assertionAudience',
      UPSTREAM_ASSERTION_LIFETIME_SECONDS: 'upstream.assertionLifetimeSeconds',
      UPSTREAM_ASSERTION_KEY: 'upstream.assertionKey',
      UPSTREAM_ASSERTION_KEY_FILE: 'upstream.assertionKeyFile',
      UPSTREAM_CREDENTIALS: 'upstream.credentials.mode',
      UPSTREAM_CREDENTIALS_HEADER: 'upstream.credentials.header',
      UPSTREAM_CREDENTIALS_SERVICE_TOKEN: 'upstream.credentials.serviceToken',
      UPSTREAM_CREDENTIALS_AUDIENCE: 'upstream.credentials.audience',
      UPSTREAM_CREDENTIALS_KEY: 'upstream.credentials.key',
      UPSTREAM_CREDENTIALS_PREVIOUS_KEYS: 'upstream.credentials.previousKeys',
      UPSTREAM_PROVIDER_ISSUER: 'upstream.credentials.provider.issuer',
      UPSTREAM_PROVIDER_AUTHORIZATION_ENDPOINT: 'upstream.credentials.provider.authorizationEndpoint',
      UPSTREAM_PROVIDER_TOKEN_ENDPOINT: 'upstream.credentials.provider.tokenEndpoint',
      UPSTREAM_PROVIDER_CLIENT_ID: 'upstream.credentials.provider.clientId',
      UPSTREAM_PROVIDER_CLIENT_SECRET: 'upstream.credentials.provider.clientSecret',
      UPSTREAM_PROVIDER_SCOPES: 'upstream.credentials.provider.scopes',
      UPSTREAM_PROVIDER_NAME: 'upstream.credentials.provider.name',
      HOST: 'proxy.host',
      PORT: 'proxy.port',
      ADMIN_HOST: 'admin.host',
      ADMIN_PORT: 'admin.port',
      PUBLIC_URL: 'proxy.publicUrl',
      IDP_ISSUER: 'idp.issuer',
      IDP_AUDIENCE: 'idp.audience',
      IDP_JWKS_URL: 'idp.jwksUrl',
      IDP_CLIENT_ID: 'idp.clientId',
      IDP_CLIENT_SECRET: 'idp.clientSecret',
      IDP_SCOPES: 'idp.scopes',
      IDP_ID_JAG: 'idp.idJag',
      LOG_LEVEL: 'logLevel',
      LOG_FORMAT: 'logFormat',
      WORKERS: 'proxy.workers',
      FORWARD_AUTH: 'proxy.forwardAuth',
      OAUTH_REFRESH_REUSE_GRACE_SECONDS: 'oauth.refreshReuseGraceSeconds',
      OAUTH_CONSENT_REMEMBER_SECONDS: 'oauth.consentRememberSeconds',
      SCIM_TOKEN: 'scim.token',
    };
    const envs = Object.fromEntries(describeConfigKeys().flatMap((k) => (k.env ? [[k.env, k.key]] : [])));
    expect(envs).toEqual(promised);
    for (const v of Object.keys(envs)) expect(configTable()).toContain(`\`${v}\``);
  });

  /** The keys the YAML tree sets, dotted (a structured key's own contents not walked into). */
  function keysSetIn(tree: Record<string, unknown>): string[] {
    const declared = new Set(describeConfigKeys().map((k) => k.key));
    const walk = (node: Record<string, unknown>, path: string): string[] =>
      Object.entries(node).flatMap(([name, value]) => {
        const dotted = path ? `${path}.${name}` : name;
        if (declared.has(dotted)) return [dotted];
        if (value === null) return []; // a section whose keys are all commented out
        return value !== null && typeof value === 'object' && !Array.isArray(value)
          ? walk(value as Record<string, unknown>, dotted)
          : [dotted];
      });
    return walk(tree, '');
  }

  it('the bundled config.yaml lists every essential key (set, or commented out)', () => {
    const set = new Set(keysSetIn(parseYaml(CONFIG_YAML) as Record<string, unknown>));
    for (const { key } of describeConfigKeys().filter((k) => k.tier === 'essential')) {
      const leaf = key.split('.').at(-1)!;
      const commented = new RegExp(`^\\s*#\\s*${leaf}:`, 'm').test(CONFIG_YAML);
      expect(set.has(key) || commented, `${key} is missing from config.yaml`).toBe(true);
    }
  });

  it('config.yaml sets a tuning key only where it chooses other than the default (the rest is in docs/configuration.md)', () => {
    const byKey = new Map(describeConfigKeys().map((k) => [k.key, k]));
    const set = keysSetIn(parseYaml(CONFIG_YAML) as Record<string, unknown>);
    for (const key of set) expect(byKey.has(key), `config.yaml sets "${key}", which is no key`).toBe(true);
    const tuning = set.filter((key) => byKey.get(key)!.tier === 'tuning');
    expect(tuning).toEqual(['redis.lookupCache']);
    const tree = parseYaml(CONFIG_YAML) as Record<string, unknown>;
    const valueOf = (key: string) => key.split('.').reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], tree);
    for (const key of tuning) expect(valueOf(key), key).not.toEqual(byKey.get(key)!.default);
  });

  it('has a short essential tier, listed first', () => {
    const keys = describeConfigKeys();
    const essential = keys.filter((k) => k.tier === 'essential');
    expect(essential.length).toBeGreaterThanOrEqual(10);
    expect(essential.length).toBeLessThanOrEqual(20);
    expect(essential.map((k) => k.key)).toEqual(expect.arrayContaining(['masterToken', 'redis.url', 'upstream.url', 'proxy.publicUrl']));
    const table = configTable();
    expect(table.indexOf('### Essential settings')).toBe(0);
    const [essentialPart, tuningPart] = table.split('### Tuning');
    for (const k of keys) expect(k.tier === 'essential' ? essentialPart : tuningPart, k.key).toContain(`| \`${k.key}\` |`);
    // A key added without a tier changes the tables (and does not compile: `tier` is required).
    expect(configTable(keys.map((k) => (k.key === 'logLevel' ? { ...k, tier: 'tuning' } : k)))).not.toBe(table);
  });

  it("the README's table of the settings people set names exactly the essential keys", () => {
    const section = README.slice(README.indexOf('## The settings people set'));
    const rows = section
      .slice(0, section.indexOf('\n## ', 1))
      .split('\n')
      .filter((line) => line.startsWith('| `'));
    const named = rows.flatMap((row) => [...row.split(' | ')[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
    const keys = describeConfigKeys();
    const byName = new Map(keys.flatMap((k) => [[k.key, k.key] as const, ...(k.env ? [[k.env, k.key] as const] : [])]));
    for (const name of named) expect(byName.has(name), `the README names "${name}", which is no key or variable`).toBe(true);
    expect(named.map((n) => byName.get(n)).sort()).toEqual(
      keys
        .filter((k) => k.tier === 'essential')
        .map((k) => k.key)
        .sort(),
    );
  });

  it('withTable replaces only what lies between the markers', () => {
    const doc = 'intro\n<!-- config:start -->\nold\n<!-- config:end -->\noutro\n';
    expect(withTable(doc, 'NEW')).toBe('intro\n<!-- config:start -->\nNEW\n<!-- config:end -->\noutro\n');
    expect(() => withTable('no markers', 'x')).toThrow(/config:start/);
  });
});

// The table of admin operations in docs/admin.md is generated from src/admin/declarations.ts
// (scripts/admin-doc.ts) the same way: an operation or field added to the code without `npm run docs:admin` fails here.
describe('admin operations table', () => {
  it(`${ADMIN_DOC} holds exactly the generated table (run \`npm run docs:admin\` to regenerate)`, () => {
    expect(tableIn(ADMIN_DOC_TEXT, OPERATIONS_MARKERS), `${ADMIN_DOC} admin operations table is stale: run \`npm run docs:admin\``).toBe(
      operationsTable(),
    );
  });

  it('README.md holds no second copy of the table', () => {
    expect(README).not.toContain(OPERATIONS_MARKERS.start);
  });

  it('an operation added to the declarations changes the table, so the check above fails until it is regenerated', () => {
    const added = {
      ...ADMIN_OPERATIONS,
      rotateMasterToken: operation({
        description: 'a test-only operation',
        fields: { graceSeconds: integer({ description: 'how long the old token still works', min: 0, max: 3600, default: 60 }) },
        answer: '`200 {}`',
      }),
    };
    const table = operationsTable(added);
    expect(table).not.toBe(tableIn(ADMIN_DOC_TEXT, OPERATIONS_MARKERS));
    expect(table.split('\n').at(-1)).toBe(
      '| `rotateMasterToken` (`rotate-master-token`) | a test-only operation | `graceSeconds?` (0..3600, default 60) | `200 {}` |',
    );
  });

  it('has one row per declared operation, each naming its fields', () => {
    const rows = operationsTable().split('\n').slice(2);
    expect(rows).toHaveLength(Object.keys(ADMIN_OPERATIONS).length);
    for (const [i, [name, spec]] of Object.entries(ADMIN_OPERATIONS).entries()) {
      expect(rows[i]).toContain(`\`${name}\``);
      for (const field of Object.keys(spec.fields)) expect(rows[i]).toContain(`\`${field}`);
    }
    expect(operationsTable()).toContain('`token` or `tokenHash`');
    expect(operationsTable()).toContain('`lifetimeSeconds` (1..31536000)');
  });
});
