// What checking a DPoP proof costs per request, measured in process: DpopVerifier.check (header and
// claims, one signature verification, the RFC 7638 thumbprint) for each algorithm a proof may use,
// then spend (the jti, here on the memory store; on Redis it is one SET NX PXAT round trip more).
// Proofs are signed beforehand, each with its own jti, so only the server's side is timed.
// Run: `npx tsx bench/dpop.ts [proofs per algorithm]`.

import { performance } from 'node:perf_hooks';
import { systemClock } from '../src/model/clock.ts';
import { DPOP_ALGORITHMS, DpopVerifier } from '../src/oauth/dpop.ts';
import { MemoryTokenStore } from '../src/store/memory.ts';
import { DpopKey } from '../test/support/dpop.ts';

const COUNT = Number(process.argv[2] ?? 2000);
const URL_MCP = 'https://mcp.example.com/mcp';
const TOKEN = 'a3f1'.repeat(16);

async function measure(alg: string): Promise<{ alg: string; checkMicros: number; spendMicros: number }> {
  const store = new MemoryTokenStore({ clock: systemClock });
  const verifier = new DpopVerifier({ store, clock: systemClock, windowSeconds: 300 });
  const key = await DpopKey.generate(alg);
  const proofs: string[] = [];
  for (let i = 0; i < COUNT; i++) proofs.push(await key.proof({ htm: 'POST', htu: URL_MCP, accessToken: TOKEN }));
  const target = { method: 'POST', urls: [URL_MCP], accessToken: TOKEN };
  // Warm-up: the JIT and jose's key import cache see the same shape as the timed loop.
  for (const proof of proofs.slice(0, Math.min(200, COUNT))) await verifier.check(proof, target);
  const checked = [];
  let started = performance.now();
  for (const proof of proofs) checked.push(await verifier.check(proof, target));
  const checkMicros = ((performance.now() - started) * 1000) / COUNT;
  started = performance.now();
  for (const proof of checked) if (!(await verifier.spend(proof))) throw new Error('a fresh jti was refused');
  const spendMicros = ((performance.now() - started) * 1000) / COUNT;
  await store.close();
  return { alg, checkMicros, spendMicros };
}

const rows = [];
for (const alg of DPOP_ALGORITHMS) rows.push(await measure(alg));
process.stdout.write(`DPoP proof check, ${COUNT} proofs per algorithm, one core, Node ${process.version}\n\n`);
process.stdout.write('| algorithm | check (µs/proof) | spend jti, memory store (µs/proof) |\n|---|---:|---:|\n');
for (const r of rows) process.stdout.write(`| ${r.alg} | ${r.checkMicros.toFixed(1)} | ${r.spendMicros.toFixed(1)} |\n`);
