// Cold start of the sidecar (spawn to both listeners up, memory store), the production way against tsx's
// loader, alternated, 8 runs each. BENCH_NODE: the Node to use (22.18 or later; default this one).
// Usage: node bench/cold-start.mjs
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
const node22 = process.env.BENCH_NODE ?? process.execPath;
const root = dirname(dirname(fileURLToPath(import.meta.url)));
const variants = {
  'node src/entry/main.ts (type stripping)': [node22, ['src/entry/main.ts']],
  'node --import tsx src/entry/main.ts': [node22, ['--import', 'tsx', 'src/entry/main.ts']],
};
const env = {
  ...process.env,
  BEARER_SECRET_MASTER: (await import('node:crypto')).randomBytes(32).toString('hex'),
  STORE: 'memory',
  UPSTREAM_URL: 'http://127.0.0.1:9/mcp',
  PORT: '0',
  ADMIN_PORT: '0',
  LOG_LEVEL: 'error',
};
function once([cmd, args]) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '',
      err = '';
    p.stdout.on('data', (d) => {
      out += d;
      if (out.includes('admin listening')) {
        const ms = performance.now() - t0;
        p.kill('SIGKILL');
        resolve(ms);
      }
    });
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (c) => {
      if (!out.includes('admin listening')) reject(new Error(`exit ${c}: ${err.slice(0, 400)}`));
    });
  });
}
const results = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let i = 0; i < 8; i++) for (const [k, v] of Object.entries(variants)) results[k].push(await once(v));
for (const [k, v] of Object.entries(results)) {
  v.sort((a, b) => a - b);
  console.log(`${k}: median ${v[v.length >> 1].toFixed(0)} ms (min ${v[0].toFixed(0)}, max ${v[v.length - 1].toFixed(0)})`);
}
