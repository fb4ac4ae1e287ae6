#!/usr/bin/env node
// mcp-bearer-proxy: `admin ...`, `token ...`, `migrate` and `help` go to the command line (src/entry/cli.ts); anything
// else starts the sidecar (src/entry/main.ts) with the same arguments (--config FILE, --check-config).
// The sources are TypeScript that Node (22.18 and later) runs as they are, its types stripped: no
// build step, no loader. Below that version only a development checkout can run them, through tsx.

await import('./typescript.js');

const command = process.argv[2];
if (command === 'admin' || command === 'token' || command === 'migrate' || command === 'help' || command === '--help' || command === '-h') {
  const { main } = await import('../src/entry/cli.ts');
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`mcp-bearer-proxy: unexpected failure: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
} else {
  await import('../src/entry/main.ts');
}
