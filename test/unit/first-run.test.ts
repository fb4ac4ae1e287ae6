// What a newcomer meets first: the README's first screen, the compose file and the Kubernetes example.
// Each check stands for a first-day stumble that was reported.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { ConfigError, buildConfig } from '../../src/config/load.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('README first screen', () => {
  const readme = read('README.md');
  const section = readme.slice(readme.indexOf('## Two commands'), readme.indexOf('\n## ', readme.indexOf('## Two commands') + 1));

  it('"Two commands" shows exactly two commands: install + demo, install + test', () => {
    const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
    const commands = block
      .split('\n')
      .map((line) => line.replace(/#.*$/, '').trim())
      .filter(Boolean);
    expect(commands).toEqual(['npm install && npm run demo', 'npm install && npm test']);
  });
});

describe('docker-compose.yml', () => {
  it("builds the sidecar from the Dockerfile's default target and the example upstream from its own, each under its own image name", () => {
    type Service = { build?: string | { context?: string; target?: string }; image?: string };
    const services = (parseYaml(read('docker-compose.yml')) as { services: Record<string, Service> }).services;
    expect(services.sidecar?.build).toBe('.');
    expect(services.upstream?.build).toEqual({ context: '.', target: 'example-upstream' });
    expect(read('Dockerfile')).toMatch(/^FROM \S+ AS example-upstream$/m);
    expect(services.sidecar?.image).toBeDefined();
    expect(services.upstream?.image).toBeDefined();
    expect(services.upstream?.image).not.toBe(services.sidecar?.image);
  });
});

describe('the Kubernetes example', () => {
  it('ships a master-token placeholder that start-up refuses, saying how to generate one', () => {
    const docs = parseAllDocuments(read('examples/kubernetes/sidecar.yaml')).map((d) => d.toJS() as Record<string, any>);
    const secret = docs.find((d) => d?.kind === 'Secret')!;
    const placeholder = secret.stringData.BEARER_SECRET_MASTER as string;
    let problems: readonly string[] = [];
    try {
      buildConfig({}, { BEARER_SECRET_MASTER: placeholder });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      problems = (err as ConfigError).problems;
    }
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^BEARER_SECRET_MASTER /);
    expect(problems[0]).toContain('openssl rand -hex 32');
  });
});
