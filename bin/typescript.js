// Lets `node --import ./bin/typescript.js file.ts` run the TypeScript sources on any Node the project
// supports for development: Node 22.18 and later strip the types themselves (production runs
// `node src/entry/main.ts` and needs nothing here); an older Node gets tsx's loader, a devDependency, so a
// development checkout still runs `npm start`, `npm run demo` and `npm run upstream`.

if (!process.features.typescript) {
  try {
    const { register } = await import('tsx/esm/api');
    register();
  } catch {
    process.stderr.write(`mcp-bearer-proxy needs Node.js 22.18 or later (this is ${process.version}), or tsx installed (npm install)\n`);
    process.exit(1);
  }
}
