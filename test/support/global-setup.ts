// Finds the real Redis the suite runs against, first found wins:
// REDIS_URL (random key prefix, only our keys are ever deleted) -> a private redis-server on a free
// port -> a Redis container through testcontainers when a Docker engine answers -> a one-line error.

import { randomBytes } from 'node:crypto';
import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { redisServerBinary, startRedisServer, type RedisServer } from './redis-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    redisSource: 'env' | 'redis-server' | 'testcontainers';
    /** Prefix under which this run writes; every test file adds its own part. */
    redisPrefix: string;
  }
}

let server: RedisServer | undefined;
let container: { stop(): Promise<unknown> } | undefined;

export async function setup(project: TestProject): Promise<void> {
  const runPrefix = `mcpauth-test-${randomBytes(4).toString('hex')}:`;
  project.provide('redisPrefix', runPrefix);
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    project.provide('redisUrl', fromEnv);
    project.provide('redisSource', 'env');
    return;
  }
  if (redisServerBinary()) {
    server = await startRedisServer();
    project.provide('redisUrl', server.url);
    project.provide('redisSource', 'redis-server');
    return;
  }
  try {
    const { GenericContainer } = await import('testcontainers');
    const started = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
    container = started;
    project.provide('redisUrl', `redis://${started.getHost()}:${started.getMappedPort(6379)}`);
    project.provide('redisSource', 'testcontainers');
    return;
  } catch {
    // fall through to the one-line error
  }
  throw new Error(
    'No Redis for the tests: set REDIS_URL=redis://host:port, or install redis-server (apt-get install -y redis-server), or start a Docker engine for testcontainers.',
  );
}

export async function teardown(): Promise<void> {
  await server?.stop();
  await container?.stop();
}
