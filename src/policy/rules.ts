// Per-tool policy: an ordered list of rules, each matching principals (kind, subject, client, scope, IdP
// group, email domain) and MCP requests (JSON-RPC method and the tool, prompt or resource it names, with
// globs), that allows or denies. The first matching rule decides; when none matches, the default does.
// Compiled and validated once at start-up: an unknown field, an empty list or a rule that can never match
// is a configuration error, not a rule that silently does nothing.

import type { AuthKind } from '../model/credentials.ts';
import type { ApprovalSettings } from '../model/approvals.ts';
import { compileArgumentConditions, type ArgumentCondition } from './arguments.ts';
import { compileApproval } from './approval-settings.ts';

/** `approve`: the call is held until a person approves it (tools/call only; see approval-settings.ts). */
export type Effect = 'allow' | 'deny' | 'approve';

/** What the sidecar knows of the caller when it decides; all of it comes from the token record. */
export interface PolicyPrincipal {
  kind: AuthKind;
  subject: string;
  /** The person's IdP issuer, as the token record names it. */
  issuer?: string | undefined;
  clientId?: string | undefined;
  /** Space-separated granted scopes (RFC 6749 §3.3). */
  scope?: string | undefined;
  groups?: readonly string[] | undefined;
  email?: string | undefined;
}

/** One JSON-RPC call as policy sees it: its method and, for name-bearing methods, the name or URI. */
export interface PolicyRequest {
  method: string;
  name?: string | undefined;
  /** A tools/call's `params.arguments` as parsed (undefined when it sent none): what argument conditions read. */
  arguments?: unknown;
}

export interface Decision {
  effect: Effect;
  /** The deciding rule's name, or `default`. */
  rule: string;
  /** For `approve`: who decides, and for how long an approval holds. */
  approval?: ApprovalSettings;
}

/**
 * Methods that name a target in their params: the tool or prompt `name`, or the resource `uri`. The
 * method tables are Maps: a client's method is looked up in them, and an object's prototype would
 * answer for `__proto__`, `constructor` or `toString`.
 */
export const NAME_BEARING_METHODS: ReadonlyMap<string, 'name' | 'uri'> = new Map([
  ['tools/call', 'name'],
  ['prompts/get', 'name'],
  ['resources/read', 'uri'],
  ['resources/subscribe', 'uri'],
  ['resources/unsubscribe', 'uri'],
]);

/**
 * Never decided by rules: the handshake, liveness and notifications carry no authority of their own,
 * and list methods are answered with the entries this principal may use (see filterListResult).
 */
export function isAlwaysAllowed(method: string): boolean {
  return method === 'initialize' || method === 'ping' || method.startsWith('notifications/') || LIST_METHODS.has(method);
}

/** List methods, the result array each answers with, the call an entry stands for and the field naming it. */
export const LIST_METHODS: ReadonlyMap<string, { items: string; method: string; field: string }> = new Map([
  ['tools/list', { items: 'tools', method: 'tools/call', field: 'name' }],
  ['prompts/list', { items: 'prompts', method: 'prompts/get', field: 'name' }],
  ['resources/list', { items: 'resources', method: 'resources/read', field: 'uri' }],
  ['resources/templates/list', { items: 'resourceTemplates', method: 'resources/read', field: 'uriTemplate' }],
]);

const KINDS: readonly AuthKind[] = ['user', 'oauth', 'master'];
const RULE_FIELDS = new Set(['name', 'effect', 'principals', 'requests', 'arguments', 'approval']);
const PRINCIPAL_FIELDS = new Set(['kinds', 'subjects', 'issuers', 'clientIds', 'scopes', 'groups', 'emailDomains']);
const REQUEST_FIELDS = new Set(['methods', 'names']);
const MAX_RULES = 1000;
const MAX_PATTERN = 512;

/** Who a rule applies to; a field left out matches anyone. */
export interface PrincipalConditions {
  kinds?: ReadonlySet<AuthKind>;
  subjects?: Glob;
  /** The person's IdP issuer (a person is the subject at an issuer). */
  issuers?: Glob;
  clientIds?: Glob;
  /** The principal must hold at least one of these scopes (exact scope tokens). */
  scopes?: readonly string[];
  groups?: readonly string[];
  emailDomains?: readonly string[];
}

interface CompiledRule extends PrincipalConditions {
  name: string;
  effect: Effect;
  methods?: Glob;
  names?: Glob;
  /** Conditions on a tools/call's arguments, all of which must hold. */
  arguments?: readonly ArgumentCondition[];
  /** An `approve` rule's settings. */
  approval?: ApprovalSettings;
}

export interface Policy {
  readonly defaultEffect: Effect;
  readonly rules: readonly CompiledRule[];
  /** Every scope a rule mentions: what an authorization server can offer (`scopes_supported`). */
  readonly scopes: readonly string[];
}

/** `*` any run of characters (`/` included), `?` one character; everything else literal, case-sensitive. */
export interface Glob {
  readonly patterns: readonly string[];
  test(value: string): boolean;
}

export function compileGlobs(patterns: readonly string[]): Glob {
  const exact = new Set<string>();
  const regexes: RegExp[] = [];
  for (const p of patterns) {
    if (!p.includes('*') && !p.includes('?')) exact.add(p);
    else
      regexes.push(
        new RegExp(
          `^${p
            .replace(/[.+^${}()|[\]\\]/g, '\\$&')
            .replace(/\*/g, '[\\s\\S]*')
            .replace(/\?/g, '[\\s\\S]')}$`,
        ),
      );
  }
  return {
    patterns,
    test: (value) => exact.has(value) || regexes.some((r) => r.test(value)),
  };
}

/** The rules of `policy.rules`, compiled, with every scope they mention. */
export interface CompiledRules {
  readonly rules: readonly CompiledRule[];
  readonly scopes: readonly string[];
}

/**
 * Validates and compiles `policy.rules` (an ordered list); every problem is reported, named by `where`
 * and the rule's index. undefined when there is any problem.
 */
export function compileRules(rawRules: unknown, where: string, problems: string[]): CompiledRules | undefined {
  const before = problems.length;
  if (!Array.isArray(rawRules) || rawRules.length === 0) {
    problems.push(`${where} must be a non-empty list of rules (leave it out to turn policy off)`);
    return undefined;
  }
  if (rawRules.length > MAX_RULES) problems.push(`${where} may hold at most ${MAX_RULES} rules`);
  const rules: CompiledRule[] = [];
  const names = new Set<string>();
  let unconditional: string | undefined;
  rawRules.forEach((raw, i) => {
    const at = `${where}[${i}]`;
    const rule = compileRule(raw, at, problems);
    if (!rule) return;
    if (names.has(rule.name)) problems.push(`${at}: the name "${rule.name}" is used by an earlier rule`);
    names.add(rule.name);
    if (unconditional !== undefined)
      problems.push(`${at} ("${rule.name}") can never match: rule "${unconditional}" before it matches every request`);
    if (isUnconditional(rule)) unconditional ??= rule.name;
    rules.push(rule);
  });
  if (problems.length > before) return undefined;
  return Object.freeze({ rules: Object.freeze(rules), scopes: Object.freeze([...new Set(rules.flatMap((r) => r.scopes ?? []))]) });
}

export function policyOf(defaultEffect: Effect, compiled: CompiledRules): Policy {
  return Object.freeze({ defaultEffect, rules: compiled.rules, scopes: compiled.scopes });
}

/** A whole policy from `{default, rules}` (the CLI's `policy check --policy FILE`, tests). */
export function compilePolicy(input: unknown, problems: string[]): Policy | undefined {
  if (!isObject(input)) {
    problems.push('policy must be a mapping with `default` and `rules`');
    return undefined;
  }
  for (const key of Object.keys(input)) {
    if (key !== 'default' && key !== 'rules') problems.push(`policy.${key} is not a policy field (known: default, rules)`);
  }
  const defaultEffect = input.default ?? 'deny';
  if (defaultEffect !== 'allow' && defaultEffect !== 'deny') problems.push('policy.default must be allow or deny');
  const before = problems.length;
  const compiled = compileRules(input.rules, 'policy.rules', problems);
  return compiled && problems.length === before && (defaultEffect === 'allow' || defaultEffect === 'deny')
    ? policyOf(defaultEffect, compiled)
    : undefined;
}

function compileRule(raw: unknown, where: string, problems: string[]): CompiledRule | undefined {
  if (!isObject(raw)) {
    problems.push(`${where} must be a mapping with name, effect, principals and/or requests`);
    return undefined;
  }
  const before = problems.length;
  unknownFields(raw, RULE_FIELDS, where, problems);
  const name = raw.name;
  if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) {
    problems.push(`${where}.name must be 1-64 characters of letters, digits, '.', '_' or '-' (it labels metrics and audit events)`);
  }
  const effect = raw.effect;
  if (effect !== 'allow' && effect !== 'deny' && effect !== 'approve') problems.push(`${where}.effect must be allow, deny or approve`);
  const rule: CompiledRule = { name: String(name), effect: effect as Effect };
  if (raw.principals !== undefined) compilePrincipals(raw.principals, `${where}.principals`, where, rule, problems);
  if (raw.requests !== undefined) {
    const r = raw.requests;
    if (!isObject(r)) problems.push(`${where}.requests must be a mapping`);
    else {
      unknownFields(r, REQUEST_FIELDS, `${where}.requests`, problems);
      const methods = stringList(r.methods, `${where}.requests.methods`, problems);
      if (methods) rule.methods = compileGlobs(methods);
      const names = stringList(r.names, `${where}.requests.names`, problems);
      if (names) rule.names = compileGlobs(names);
      impossibleRequests(rule, where, problems);
    }
  }
  if (raw.arguments !== undefined) compileArguments(raw.arguments, where, rule, problems);
  if (effect === 'approve' || raw.approval !== undefined) compileApprovalOf(raw.approval, where, rule, problems);
  return problems.length > before ? undefined : rule;
}

/** An `approve` rule's `approval`: only such a rule has one, and it holds tools/call alone. */
function compileApprovalOf(raw: unknown, where: string, rule: CompiledRule, problems: string[]): void {
  if (rule.effect !== 'approve') {
    problems.push(`${where} ("${rule.name}"): approval goes with effect: approve`);
    return;
  }
  const settings = compileApproval(raw, `${where}.approval`, problems);
  if (settings) rule.approval = settings;
  const methods = rule.methods?.patterns;
  if (methods?.length !== 1 || methods[0] !== 'tools/call')
    problems.push(`${where} ("${rule.name}"): a call is held for approval only as a tools/call, so requests.methods must be [tools/call]`);
}

/** A rule's `arguments`: they are a tools/call's, so the rule must be about tools/call alone. */
function compileArguments(raw: unknown, where: string, rule: CompiledRule, problems: string[]): void {
  const conditions = compileArgumentConditions(raw, `${where}.arguments`, problems);
  if (conditions) rule.arguments = conditions;
  const methods = rule.methods?.patterns;
  if (methods?.length !== 1 || methods[0] !== 'tools/call')
    problems.push(`${where} ("${rule.name}"): arguments are a tools/call's, so requests.methods must be [tools/call]`);
}

/**
 * Reads a `principals` mapping (kinds, subjects, clientIds, scopes, groups, emailDomains) into `into`;
 * `at` names the mapping in problems, `rule` the rule it belongs to. Shared by policy and quota rules.
 */
export function compilePrincipals(p: unknown, at: string, rule: string, into: PrincipalConditions, problems: string[]): void {
  if (!isObject(p)) {
    problems.push(`${at} must be a mapping`);
    return;
  }
  unknownFields(p, PRINCIPAL_FIELDS, at, problems);
  const kinds = stringList(p.kinds, `${at}.kinds`, problems);
  if (kinds) {
    for (const k of kinds) if (!KINDS.includes(k as AuthKind)) problems.push(`${at}.kinds: "${k}" is not one of user, oauth, master`);
    into.kinds = new Set(kinds as AuthKind[]);
  }
  const subjects = stringList(p.subjects, `${at}.subjects`, problems);
  if (subjects) into.subjects = compileGlobs(subjects);
  const issuers = stringList(p.issuers, `${at}.issuers`, problems);
  if (issuers) into.issuers = compileGlobs(issuers);
  const clientIds = stringList(p.clientIds, `${at}.clientIds`, problems);
  if (clientIds) into.clientIds = compileGlobs(clientIds);
  const scopes = stringList(p.scopes, `${at}.scopes`, problems);
  if (scopes) {
    for (const s of scopes)
      if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s)) problems.push(`${at}.scopes: "${s}" is not a scope token (RFC 6749 §3.3)`);
    into.scopes = scopes;
  }
  const groups = stringList(p.groups, `${at}.groups`, problems);
  if (groups) into.groups = groups;
  const domains = stringList(p.emailDomains, `${at}.emailDomains`, problems);
  if (domains) into.emailDomains = domains.map((d) => d.toLowerCase());
  impossiblePrincipals(into, rule, problems);
}

/** Facts a kind of token can never carry: client ids and scopes come with OAuth tokens only. */
function impossiblePrincipals(rule: PrincipalConditions, where: string, problems: string[]): void {
  if (!rule.kinds) return;
  const oauth = rule.kinds.has('oauth');
  const person = oauth || rule.kinds.has('user');
  for (const [field, needs, has] of [
    ['clientIds', 'oauth', rule.clientIds !== undefined && !oauth],
    ['scopes', 'oauth', rule.scopes !== undefined && !oauth],
    ['groups', 'user or oauth', rule.groups !== undefined && !person],
    ['issuers', 'user or oauth', rule.issuers !== undefined && !person],
    ['emailDomains', 'user or oauth', rule.emailDomains !== undefined && !person],
  ] as const) {
    if (has) problems.push(`${where} can never match: principals.${field} needs kinds to include ${needs}`);
  }
}

/** Names are matched only on methods that carry one; a rule naming targets of other methods is dead. */
function impossibleRequests(rule: CompiledRule, where: string, problems: string[]): void {
  const methods = rule.methods;
  if (!methods) return;
  const reachable = methods.patterns.filter((p) => !isAlwaysAllowedPattern(p));
  if (reachable.length === 0) {
    problems.push(
      `${where} can never match: initialize, ping, notifications/* and list methods are always allowed (lists are filtered by the tools/call, prompts/get and resources/read rules)`,
    );
    return;
  }
  if (rule.names && ![...NAME_BEARING_METHODS.keys()].some((m) => methods.test(m))) {
    problems.push(
      `${where} can never match: requests.names applies to ${[...NAME_BEARING_METHODS.keys()].join(', ')}, and requests.methods names none of them`,
    );
  }
}

function isAlwaysAllowedPattern(pattern: string): boolean {
  return !pattern.includes('*') && !pattern.includes('?') && isAlwaysAllowed(pattern);
}

function isUnconditional(rule: CompiledRule): boolean {
  return (
    rule.kinds === undefined &&
    rule.subjects === undefined &&
    rule.issuers === undefined &&
    rule.clientIds === undefined &&
    rule.scopes === undefined &&
    rule.groups === undefined &&
    rule.emailDomains === undefined &&
    rule.methods === undefined &&
    rule.names === undefined &&
    rule.arguments === undefined
  );
}

export function principalMatches(rule: PrincipalConditions, p: PolicyPrincipal, scopes: readonly string[]): boolean {
  if (rule.kinds && !rule.kinds.has(p.kind)) return false;
  if (rule.subjects && !rule.subjects.test(p.subject)) return false;
  if (rule.issuers && (p.issuer === undefined || !rule.issuers.test(p.issuer))) return false;
  if (rule.clientIds && (p.clientId === undefined || !rule.clientIds.test(p.clientId))) return false;
  if (rule.scopes && !rule.scopes.some((s) => scopes.includes(s))) return false;
  if (rule.groups && !rule.groups.some((g) => p.groups?.includes(g) === true)) return false;
  if (rule.emailDomains) {
    const email = p.email?.toLowerCase() ?? '';
    const at = email.lastIndexOf('@');
    if (at === -1 || !rule.emailDomains.includes(email.slice(at + 1))) return false;
  }
  return true;
}

/** `withArguments` false: the argument conditions are left out (a list entry's call has no arguments yet). */
function requestMatches(rule: CompiledRule, r: PolicyRequest, withArguments = true): boolean {
  if (rule.methods && !rule.methods.test(r.method)) return false;
  if (rule.names) {
    if (!NAME_BEARING_METHODS.has(r.method) || r.name === undefined) return false;
    if (!rule.names.test(r.name)) return false;
  }
  return rule.arguments === undefined || !withArguments || failingCondition(rule, r) === undefined;
}

/** The first of the rule's argument conditions that does not hold for this call, if any. */
function failingCondition(rule: CompiledRule, r: PolicyRequest): ArgumentCondition | undefined {
  return rule.arguments?.find((c) => !c.holds(r.arguments));
}

export function scopesOf(p: PolicyPrincipal): readonly string[] {
  return p.scope ? p.scope.split(' ').filter((s) => s.length > 0) : [];
}

function decideWith(policy: Policy, p: PolicyPrincipal, scopes: readonly string[], r: PolicyRequest): Decision {
  for (const rule of policy.rules) {
    if (requestMatches(rule, r) && principalMatches(rule, p, scopes))
      return rule.approval === undefined
        ? { effect: rule.effect, rule: rule.name }
        : { effect: rule.effect, rule: rule.name, approval: rule.approval };
  }
  return { effect: policy.defaultEffect, rule: 'default' };
}

/**
 * Whether a list shows an entry, the arguments of a call to it being unknown: the first matching rule's
 * effect, or the default, where a rule with argument conditions counts as matching when it allows (some
 * arguments may be allowed) and is passed over otherwise (other arguments may not be refused).
 * Always-allowed methods are the caller's business.
 */
export function decide(policy: Policy, p: PolicyPrincipal, r: PolicyRequest): Decision {
  const scopes = scopesOf(p);
  for (const rule of policy.rules) {
    if (rule.arguments !== undefined && rule.effect !== 'allow') continue;
    if (requestMatches(rule, r, false) && principalMatches(rule, p, scopes)) return { effect: rule.effect, rule: rule.name };
  }
  return { effect: policy.defaultEffect, rule: 'default' };
}

/**
 * A client's call, decided on every reading of its target an upstream may act on (see readingsOf): the
 * first reading that is denied decides; when all are allowed, the target as sent does.
 */
export function decideCall(policy: Policy, p: PolicyPrincipal, r: PolicyRequest): Decision {
  return decideReadings(policy, p, scopesOf(p), r);
}

/** The strictest decision over the readings of a call's target: deny, then approve, then allow. */
function decideReadings(policy: Policy, p: PolicyPrincipal, scopes: readonly string[], r: PolicyRequest): Decision {
  let strictest = decideWith(policy, p, scopes, r);
  if (strictest.effect === 'deny' || r.name === undefined) return strictest;
  for (const name of readingsOf(r).slice(1)) {
    const d = decideWith(policy, p, scopes, { ...r, name });
    if (d.effect === 'deny') return d;
    if (d.effect === 'approve' && strictest.effect === 'allow') strictest = d;
  }
  return strictest;
}

/**
 * The target of a call as sent, then the other forms an upstream may read it as. A resource URI: its
 * WHATWG URL serialisation (what the TypeScript SDK looks resources up by: `..` and `%2e%2e` segments
 * resolved in any case, `\` read as `/` in http(s) URLs, scheme and host lower-cased), and the same after
 * decoding percent-encoded unreserved characters (RFC 3986 §6.2.2.2, as servers that unescape a path
 * read it). A tool or prompt name: its NFKC form without surrounding white space. A plain ASCII name has
 * no other form.
 */
export function readingsOf(r: PolicyRequest): string[] {
  const name = r.name;
  if (name === undefined) return [];
  const readings = [name];
  const add = (v: string | undefined) => {
    if (v !== undefined && !readings.includes(v)) readings.push(v);
  };
  if (NAME_BEARING_METHODS.get(r.method) === 'uri') {
    add(urlForm(name));
    const unescaped = name.replace(/%[0-9A-Fa-f]{2}/g, (escape) => {
      const c = String.fromCharCode(parseInt(escape.slice(1), 16));
      return /[A-Za-z0-9._~-]/.test(c) ? c : escape;
    });
    if (unescaped !== name) {
      add(unescaped);
      add(urlForm(unescaped));
    }
  } else if (!/^[\x21-\x7e]*$/.test(name)) {
    add(name.normalize('NFKC').trim());
  }
  return readings;
}

function urlForm(uri: string): string | undefined {
  try {
    return new URL(uri).href;
  } catch {
    return undefined;
  }
}

/**
 * For a denied call: a scope that, added to what the principal holds, would make the policy allow it
 * (the `scope` of an `insufficient_scope` challenge, so the client can ask the user for it), or undefined
 * when no scope would help. Checked by deciding again, so the answer is never a scope that still fails.
 */
export function stepUpScope(policy: Policy, p: PolicyPrincipal, r: PolicyRequest): string | undefined {
  const held = scopesOf(p);
  for (const rule of policy.rules) {
    if (rule.effect !== 'allow' || !rule.scopes || !requestMatches(rule, r)) continue;
    for (const candidate of rule.scopes) {
      if (held.includes(candidate)) continue;
      const widened = [...held, candidate];
      if (decideReadings(policy, p, widened, r).effect === 'allow') return [...widened].join(' ');
    }
  }
  return undefined;
}

export function stringList(value: unknown, where: string, problems: string[]): string[] | undefined {
  if (value === undefined) return undefined;
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((v) => typeof v === 'string' && v.length > 0 && v.length <= MAX_PATTERN)) {
    problems.push(
      `${where} must be a non-empty list of non-empty strings (at most ${MAX_PATTERN} characters each); an empty list would never match`,
    );
    return undefined;
  }
  return list as string[];
}

export function unknownFields(obj: Record<string, unknown>, known: ReadonlySet<string>, where: string, problems: string[]): void {
  for (const key of Object.keys(obj))
    if (!known.has(key)) problems.push(`${where}.${key} is not a known field (known: ${[...known].join(', ')})`);
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What a dry run tells: the effect, what decided it, and for a denial the step-up scope if any. */
export interface Explanation {
  effect: Effect;
  decidedBy: 'no policy' | 'always allowed' | 'rule' | 'default';
  rule?: string;
  reason: string;
  scope?: string;
  /** The deciding rule's argument conditions, each of which held. */
  conditions?: string[];
  /** Rules before it that matched but for an argument condition that did not hold: which one. */
  passedOver?: { rule: string; condition: string }[];
  principal: PolicyPrincipal;
}

/** The decision for one call, explained (the admin operation `explainPolicy` and its CLI command). */
export function explainCall(policy: Policy | undefined, p: PolicyPrincipal, r: PolicyRequest): Explanation {
  const principal = { ...p };
  if (policy === undefined)
    return {
      effect: 'allow',
      decidedBy: 'no policy',
      reason: 'no policy is configured: every call of a valid token is forwarded',
      principal,
    };
  if (isAlwaysAllowed(r.method)) {
    return {
      effect: 'allow',
      decidedBy: 'always allowed',
      reason: `${r.method} is never decided by rules (handshake, liveness, notifications; list answers are filtered)`,
      principal,
    };
  }
  const d = decideCall(policy, p, r);
  const scope = d.effect === 'deny' ? stepUpScope(policy, p, r) : undefined;
  const reason =
    d.rule === 'default'
      ? `no rule matches; the policy's default is ${d.effect}`
      : `rule "${d.rule}" is the first that matches this principal and call`;
  return {
    effect: d.effect,
    decidedBy: d.rule === 'default' ? 'default' : 'rule',
    ...(d.rule === 'default' ? {} : { rule: d.rule }),
    reason,
    ...(scope ? { scope } : {}),
    ...argumentTrace(policy, p, r, d.rule),
    principal,
  };
}

/** What the arguments did to a decision: the deciding rule's conditions, and the rules a condition passed over. */
function argumentTrace(
  policy: Policy,
  p: PolicyPrincipal,
  r: PolicyRequest,
  decidedBy: string,
): Pick<Explanation, 'conditions' | 'passedOver'> {
  const scopes = scopesOf(p);
  const passedOver: { rule: string; condition: string }[] = [];
  for (const rule of policy.rules) {
    if (rule.name === decidedBy) {
      const conditions = rule.arguments?.map((c) => c.label);
      return { ...(conditions ? { conditions } : {}), ...(passedOver.length > 0 ? { passedOver } : {}) };
    }
    if (rule.arguments === undefined || !requestMatches(rule, r, false) || !principalMatches(rule, p, scopes)) continue;
    const failing = failingCondition(rule, r);
    if (failing !== undefined) passedOver.push({ rule: rule.name, condition: `${failing.label} does not hold` });
  }
  return passedOver.length > 0 ? { passedOver } : {};
}
