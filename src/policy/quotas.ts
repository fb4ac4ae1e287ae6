// Per-caller quotas (`policy.quotas`): an ordered list of rules, each matching MCP requests (the tools of
// `tools/call`, JSON-RPC methods) and principals, and allowing `limit` of them per caller (subject, OAuth
// client or client address) in each window of `windowSeconds`. The first rule that matches a request
// counts it; a request no rule matches is not counted. Compiled and validated once at start-up: a limit
// or window that is zero, negative or beyond its bound is a configuration error naming the rule.

import { AUTHORIZATION_META_KEY } from './enforce.ts';
import { personKey, personOf } from '../model/person.ts';
import { compileGlobs, compilePrincipals, isObject, principalMatches, readingsOf, scopesOf, stringList, unknownFields } from './rules.ts';
import type { Glob, PolicyPrincipal, PolicyRequest, PrincipalConditions } from './rules.ts';

/** What a quota is counted per: the principal's subject, its OAuth client, or the client's address. */
export type QuotaPer = 'subject' | 'client' | 'address';

const PER: readonly QuotaPer[] = ['subject', 'client', 'address'];
const QUOTA_FIELDS = new Set(['name', 'match', 'per', 'limit', 'windowSeconds']);
const MATCH_FIELDS = new Set(['tools', 'methods', 'principals']);
const MAX_QUOTAS = 100;
/** Bounds of a rule: a billion requests, 31 days. Beyond them a typo (an extra 0) is likelier than intent. */
export const MAX_QUOTA_LIMIT = 1_000_000_000;
export const MAX_QUOTA_WINDOW_SECONDS = 31 * 24 * 3600;

export interface QuotaRule {
  /** The rule's name, or `#<index>` when it has none: labels metrics and audit events (bounded). */
  readonly label: string;
  readonly per: QuotaPer;
  readonly limit: number;
  readonly windowSeconds: number;
  /** `tools/call` of these tools (every reading of the name, as the policy decides it). */
  readonly tools?: Glob;
  readonly methods?: Glob;
  readonly principals?: PrincipalConditions;
}

export interface Quotas {
  readonly rules: readonly QuotaRule[];
}

/** Validates and compiles `policy.quotas`; every problem is reported, named by `where` and the rule's index. */
export function compileQuotas(raw: unknown, where: string, problems: string[]): Quotas | undefined {
  const before = problems.length;
  if (!Array.isArray(raw) || raw.length === 0) {
    problems.push(`${where} must be a non-empty list of quota rules (leave it out for no quotas)`);
    return undefined;
  }
  if (raw.length > MAX_QUOTAS) problems.push(`${where} may hold at most ${MAX_QUOTAS} rules`);
  const rules: QuotaRule[] = [];
  const labels = new Set<string>();
  raw.forEach((entry, i) => {
    const at = `${where}[${i}]`;
    const rule = compileQuota(entry, i, at, problems);
    if (!rule) return;
    if (labels.has(rule.label)) problems.push(`${at}: the name "${rule.label}" is used by an earlier quota rule`);
    labels.add(rule.label);
    rules.push(rule);
  });
  if (problems.length > before) return undefined;
  return Object.freeze({ rules: Object.freeze(rules) });
}

function compileQuota(raw: unknown, index: number, at: string, problems: string[]): QuotaRule | undefined {
  if (!isObject(raw)) {
    problems.push(`${at} must be a mapping with per, limit, windowSeconds and optionally name and match`);
    return undefined;
  }
  const before = problems.length;
  unknownFields(raw, QUOTA_FIELDS, at, problems);
  const name = raw.name;
  if (name !== undefined && (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name))) {
    problems.push(`${at}.name must be 1-64 characters of letters, digits, '.', '_' or '-' (it labels metrics and audit events)`);
  }
  const per = raw.per;
  if (!PER.includes(per as QuotaPer)) problems.push(`${at}.per must be one of ${PER.join(', ')}`);
  const limit = boundedInteger(raw.limit, `${at}.limit`, MAX_QUOTA_LIMIT, problems);
  const windowSeconds = boundedInteger(raw.windowSeconds, `${at}.windowSeconds`, MAX_QUOTA_WINDOW_SECONDS, problems);
  const rule: { -readonly [K in keyof QuotaRule]: QuotaRule[K] } = {
    label: typeof name === 'string' ? name : `#${index}`,
    per: per as QuotaPer,
    limit: limit ?? 0,
    windowSeconds: windowSeconds ?? 0,
  };
  if (raw.match !== undefined) {
    const match = raw.match;
    if (!isObject(match)) problems.push(`${at}.match must be a mapping with tools, methods and/or principals`);
    else {
      unknownFields(match, MATCH_FIELDS, `${at}.match`, problems);
      const tools = stringList(match.tools, `${at}.match.tools`, problems);
      if (tools) rule.tools = compileGlobs(tools);
      const methods = stringList(match.methods, `${at}.match.methods`, problems);
      if (methods) rule.methods = compileGlobs(methods);
      if (rule.tools && rule.methods && !rule.methods.test('tools/call')) {
        problems.push(`${at} can never match: match.tools applies to tools/call, and match.methods does not name it`);
      }
      if (match.principals !== undefined) {
        const principals: PrincipalConditions = {};
        compilePrincipals(match.principals, `${at}.match.principals`, at, principals, problems);
        rule.principals = principals;
      }
    }
  }
  if (rule.per === 'client' && rule.principals?.kinds && !rule.principals.kinds.has('oauth')) {
    problems.push(`${at} can never match: per client counts OAuth clients, and match.principals.kinds does not include oauth`);
  }
  return problems.length > before ? undefined : Object.freeze(rule);
}

function boundedInteger(value: unknown, where: string, max: number, problems: string[]): number | undefined {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= max) return value;
  problems.push(`${where} must be an integer from 1 to ${max} (got ${value === undefined ? 'nothing' : JSON.stringify(value)})`);
  return undefined;
}

/** The caller a quota counts: what `per` names, as the request shows it. */
export interface QuotaCaller {
  readonly principal: PolicyPrincipal;
  /** The client's address as per-address limits count it (an IPv6 client as its network). */
  readonly address: string;
  /** The IDP_* provider's issuer: its people are counted by subject alone (model/person.ts). */
  readonly defaultIssuer?: string | undefined;
}

/** The quota that counts one request, and under which identity; undefined when none applies. */
export interface QuotaMatch {
  readonly rule: QuotaRule;
  /** What the counter is kept for (`subject:<kind>:<subject>`, `client:<id>`, `address:<address>`). */
  readonly who: string;
}

/**
 * The first rule that counts `call` for `caller`. A rule counted per client applies to OAuth principals
 * only (a user token or the master token has no client). Only JSON-RPC requests are counted, never
 * notifications or responses: the caller decides that.
 */
export function quotaFor(quotas: Quotas, caller: QuotaCaller, call: PolicyRequest): QuotaMatch | undefined {
  const p = caller.principal;
  const scopes = scopesOf(p);
  for (const rule of quotas.rules) {
    if (rule.methods && !rule.methods.test(call.method)) continue;
    if (rule.tools && !(call.method === 'tools/call' && call.name !== undefined && readingsOf(call).some((n) => rule.tools!.test(n))))
      continue;
    if (rule.principals && !principalMatches(rule.principals, p, scopes)) continue;
    const who = whoOf(rule.per, caller);
    if (who === undefined) continue;
    return { rule, who };
  }
  return undefined;
}

function whoOf(per: QuotaPer, caller: QuotaCaller): string | undefined {
  const p = caller.principal;
  // Per person: another provider's person of the same `sub` has a counter of their own.
  if (per === 'subject')
    return `subject:${p.kind}:${p.kind === 'master' ? p.subject : personKey(personOf(p, caller.defaultIssuer), caller.defaultIssuer)}`;
  if (per === 'client') return p.clientId === undefined ? undefined : `client:${p.clientId}`;
  return `address:${caller.address}`;
}

/** The store counter's name for a match: the rule and its window (a changed window starts afresh), the caller. */
export function quotaCounterName(match: QuotaMatch): string {
  return `${match.rule.label}:${match.rule.windowSeconds}:${match.who}`;
}

/** A request refused by a quota: what its answer needs. */
export interface QuotaRefusal {
  readonly rule: QuotaRule;
  /** The call that did not fit (the first of its rule and caller in the body). */
  readonly call: PolicyRequest;
  /** Epoch ms at which the rule's window ends for this caller. */
  readonly resetAt: number;
  /** The ids of the body's requests, in order; empty when unseen (forward-auth). */
  readonly requestIds: readonly (string | number | null)[];
  readonly batch: boolean;
}

/** The reason a refusal over a quota carries in its authorization context. */
export const QUOTA_REASON = 'quota_exceeded';

/**
 * The answer to a refusal: a tool error at 200 for one `tools/call` (the model reads it and moves on,
 * since no other authorization would help before the reset), else a 429 with Retry-After. The answer
 * names the tool the client sent, the limit and the reset time; never the rule.
 */
export function quotaAnswer(
  refusal: QuotaRefusal,
  contextId: string,
  now: number,
):
  | { readonly status: 200; readonly body: string }
  | { readonly status: 429; readonly retryAfterSeconds: number; readonly description: string } {
  const { call, rule, resetAt, requestIds, batch } = refusal;
  const retryAfterSeconds = Math.max(1, Math.ceil((resetAt - now) / 1000));
  const reset = new Date(resetAt).toISOString();
  const allowance = `${rule.limit} per ${rule.windowSeconds} s`;
  const id = requestIds[0];
  if (call.method !== 'tools/call' || batch || requestIds.length !== 1 || id === null || id === undefined) {
    const target = call.name === undefined ? call.method : `${call.method} ${call.name}`;
    return {
      status: 429,
      retryAfterSeconds,
      description: `${target}: over the quota of ${allowance} for this caller; it resets at ${reset}`,
    };
  }
  const context = {
    [AUTHORIZATION_META_KEY]: {
      reason: QUOTA_REASON,
      remediation: 'unavailable',
      resetAt: reset,
      retryAfterSeconds,
      authorizationContextId: contextId,
    },
  };
  const text = `The tool "${call.name}" has reached its usage limit for you (${allowance}). It resets at ${reset} (in ${retryAfterSeconds} s). Do not retry it before then; continue without it. (Reference: ${contextId})`;
  return {
    status: 200,
    body: JSON.stringify({ jsonrpc: '2.0', id, result: { isError: true, content: [{ type: 'text', text }], _meta: context } }),
  };
}
