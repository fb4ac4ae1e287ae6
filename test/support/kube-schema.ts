// Checks a rendered Kubernetes object against the API types of the `kubernetes-models` package, twice:
// - its own validators (Ajv, compiled from the Kubernetes OpenAPI schema): types, enums, required
//   fields. They let unknown fields through, as the schema has no `additionalProperties: false`;
// - so every field is also looked up in the package's type declarations (its .d.ts files, generated
//   from the same OpenAPI schema), read with the TypeScript compiler: a key that the declared type of
//   its parent does not have is reported as unknown, as the API server's strict field validation
//   (`kubectl apply --validate=strict`) would. Maps (labels, annotations, data) are string-indexed in
//   the declarations, so their keys are free.

import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ENTRY = join(ROOT, 'test/support/kube-schema-types.virtual.ts');

export interface KubeObject {
  apiVersion: string;
  kind: string;
  [key: string]: unknown;
}

/** `apps/v1` + `Deployment` -> the module of kubernetes-models that declares it. */
function modulePath(object: KubeObject): string {
  if (!/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(object.apiVersion) || !/^[A-Z][A-Za-z]+$/.test(object.kind))
    throw new Error(`not a Kubernetes type: ${object.apiVersion} ${object.kind}`);
  return `kubernetes-models/${object.apiVersion}/${object.kind}`;
}

const declared = new Map<string, ts.Type>();
let typeChecker: ts.TypeChecker;

/**
 * Reads the declarations of these objects' types (and of every type read before) in one TypeScript
 * program: a program takes about a second, so call it once with every object to check.
 */
export function declareKubeTypes(objects: KubeObject[]): void {
  const wanted = objects.map((o) => modulePath(o).slice('kubernetes-models/'.length));
  if (wanted.every((k) => declared.has(k))) return;
  const keys = [...new Set([...declared.keys(), ...wanted])];
  const source = keys.map((k, i) => `import type { I${k.split('/').at(-1)} as T${i} } from 'kubernetes-models/${k}';`).join('\n') + '\n';
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (file, lang, ...rest) =>
    resolve(file) === ENTRY ? ts.createSourceFile(file, source, lang) : getSourceFile(file, lang, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (file) => resolve(file) === ENTRY || fileExists(file);
  const program = ts.createProgram([ENTRY], options, host);
  const problems = ts.getPreEmitDiagnostics(program).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (problems.length > 0)
    throw new Error(`kubernetes-models declares no such type: ${ts.flattenDiagnosticMessageText(problems[0]!.messageText, ' ')}`);
  typeChecker = program.getTypeChecker();
  const entry = program.getSourceFile(ENTRY)!;
  declared.clear();
  entry.statements.forEach((statement, i) => {
    const clause = (statement as ts.ImportDeclaration).importClause!;
    const binding = (clause.namedBindings as ts.NamedImports).elements[0]!;
    const symbol = typeChecker.getAliasedSymbol(typeChecker.getSymbolAtLocation(binding.name)!);
    declared.set(keys[i]!, typeChecker.getDeclaredTypeOfSymbol(symbol));
  });
}

/** Every field of `value` that `type` does not declare, by path. */
function unknownFields(value: unknown, type: ts.Type, path: string, found: string[]): void {
  if (value === null || typeof value !== 'object') return;
  const checker = typeChecker;
  const t = checker.getNonNullableType(type);
  if (t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return; // free-form JSON (e.g. x-kubernetes-preserve-unknown-fields)
  if (Array.isArray(value)) {
    const element = checker.isArrayType(t) ? checker.getTypeArguments(t as ts.TypeReference)[0] : undefined;
    if (!element) {
      found.push(`${path} (a list where the API has no list)`);
      return;
    }
    value.forEach((item, i) => unknownFields(item, element, `${path}[${i}]`, found));
    return;
  }
  const objects = (t.isUnion() ? t.types : [t]).filter((m) => m.flags & ts.TypeFlags.Object);
  if (objects.length === 0) {
    found.push(`${path} (an object where the API has a scalar)`);
    return;
  }
  for (const [key, child] of Object.entries(value)) {
    const here = path === '' ? key : `${path}.${key}`;
    const property = objects.map((o) => checker.getPropertyOfType(o, key)).find((p) => p !== undefined);
    if (property) {
      unknownFields(child, checker.getTypeOfSymbol(property), here, found);
      continue;
    }
    const index = objects.map((o) => checker.getIndexTypeOfType(o, ts.IndexKind.String)).find((i) => i !== undefined);
    if (index) unknownFields(child, index, here, found);
    else found.push(here);
  }
}

/** What the API server would refuse in `object`: schema violations, then unknown fields. Empty when it is valid. */
export async function kubeProblems(object: KubeObject): Promise<string[]> {
  const problems: string[] = [];
  const module = (await import(modulePath(object))) as Record<string, new (data: unknown) => { validate(): void }>;
  const Model = module[object.kind];
  if (!Model) return [`kubernetes-models has no ${object.apiVersion} ${object.kind}`];
  try {
    new Model(object).validate();
  } catch (err) {
    problems.push((err as Error).message);
  }
  const unknown: string[] = [];
  declareKubeTypes([object]);
  unknownFields(object, declared.get(`${object.apiVersion}/${object.kind}`)!, '', unknown);
  problems.push(...unknown.map((p) => `unknown field ${p}`));
  return problems;
}

/** Only kubernetes-models' own validators: what they alone let through (used to show why the second check exists). */
export async function modelValidates(object: KubeObject): Promise<boolean> {
  const module = (await import(modulePath(object))) as Record<string, new (data: unknown) => { validate(): void }>;
  try {
    new module[object.kind]!(object).validate();
    return true;
  } catch {
    return false;
  }
}
