// src/app.ts only composes: each feature's wiring lives in its own folder's factory (src/*/wiring.ts,
// src/http/listeners.ts), so the composition root stays a readable list of calls.

import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const APP = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/app.ts');
const MAX_LINES = 350;

describe('the composition root', () => {
  it(`src/app.ts is at most ${MAX_LINES} lines`, () => {
    const lines = readFileSync(APP, 'utf8').replace(/\n$/, '').split('\n').length;
    expect(lines).toBeLessThanOrEqual(MAX_LINES);
  });
});
