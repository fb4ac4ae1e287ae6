// Every identity header the sidecar sets is carried by each ingress example onto the request to the
// MCP server, and a client-sent one under that name is removed first. nginx and Caddy run for real in
// test/e2e/ingress.test.ts; Traefik and Envoy cannot be installed here, so their configurations are
// read as data: a name one of the four leaves out (the MCP server then never learns it) shows here.

import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { SIDECAR_IDENTITY_HEADERS } from '../support/identity-spellings.ts';

const example = (path: string) => readFileSync(new URL(`../../examples/${path}`, import.meta.url), 'utf8');

/** Goes down `path` (keys, or the element of a list whose `name` is the string) and fails loudly where it ends. */
function dig(value: unknown, path: Array<string | number>): unknown {
  let at = value;
  for (const step of path) {
    at =
      Array.isArray(at) && typeof step === 'string'
        ? at.find((item: { name?: string }) => item.name === step)
        : (at as Record<string, unknown>)?.[step];
    if (at === undefined) throw new Error(`no ${String(step)} in ${path.join('.')}`);
  }
  return at;
}

describe.each(SIDECAR_IDENTITY_HEADERS)('%s in the ingress examples', (name) => {
  it('nginx sets it from /authz, replacing what the client sent', () => {
    const variable = `$upstream_http_${name.toLowerCase().replaceAll('-', '_')}`;
    const text = example('nginx/mcp.conf');
    const saved = new RegExp(`auth_request_set (\\$\\w+) +\\${variable};`).exec(text)?.[1];
    expect(saved, variable).toBeDefined();
    expect(text).toMatch(new RegExp(`proxy_set_header ${name} +\\${saved};`));
  });

  it('Caddy sets it from the answer of /authz', () => {
    // Go's canonical spelling (X-Mcp-Auth-Kind), which Caddy 2.6 looks placeholders up by.
    const canonical = name
      .split('-')
      .map((word) => word[0] + word.slice(1).toLowerCase())
      .join('-');
    expect(example('caddy/Caddyfile')).toContain(`${name} {rp.header.${canonical}}`);
  });

  it("Traefik's ForwardAuth removes the client's and copies the sidecar's", () => {
    const forwardAuth = dig(parse(example('traefik/dynamic.yml')), ['http', 'middlewares', 'mcp-authz', 'forwardAuth']) as {
      authResponseHeadersRegex?: string;
      authResponseHeaders?: string[];
    };
    const pattern = forwardAuth.authResponseHeadersRegex!.replace(/^\(\?i\)/, '');
    expect(new RegExp(pattern, 'i').test(name)).toBe(true);
    expect(forwardAuth.authResponseHeaders).toBeUndefined();
  });

  it("Envoy removes the client's and lets ext_authz set the sidecar's", () => {
    const manager = dig(parse(example('envoy/envoy.yaml')), [
      'static_resources',
      'listeners',
      'mcp',
      'filter_chains',
      0,
      'filters',
      'envoy.filters.network.http_connection_manager',
      'typed_config',
    ]);
    const host = dig(manager, ['route_config', 'virtual_hosts', 'mcp']) as { request_headers_to_remove: string[] };
    expect(host.request_headers_to_remove).toContain(name.toLowerCase());
    const patterns = dig(manager, [
      'http_filters',
      'envoy.filters.http.ext_authz',
      'typed_config',
      'http_service',
      'authorization_response',
      'allowed_upstream_headers',
      'patterns',
    ]) as Array<{ exact?: string; prefix?: string }>;
    expect(
      patterns.some((p) => p.exact === name.toLowerCase() || (p.prefix !== undefined && name.toLowerCase().startsWith(p.prefix))),
    ).toBe(true);
  });
});
