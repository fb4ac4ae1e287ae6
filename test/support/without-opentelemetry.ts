// An import hook (`node --import ./test/support/without-opentelemetry.ts ...`) under which every
// `@opentelemetry/*` package is missing, as after `npm ci --omit=dev --omit=optional`: it is resolved
// from a directory with no node_modules, so the error is Node's own for a package not installed
// (ERR_MODULE_NOT_FOUND, "Cannot find package '@opentelemetry/...'"). Everything else resolves as usual.

import { registerHooks } from 'node:module';
import { pathToFileURL } from 'node:url';

const NOWHERE = pathToFileURL('/without-opentelemetry.js').href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    return nextResolve(specifier, specifier.startsWith('@opentelemetry/') ? { ...context, parentURL: NOWHERE } : context);
  },
});
