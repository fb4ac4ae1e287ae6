// `idp.providers`: identity providers besides (or instead of) the one the IDP_* variables name. Each
// has its own issuer, client, audience, keys and claim rules; the rest (algorithms, timeouts, scopes,
// ID-JAG) is the `idp` section's. A person is (issuer, subject): two providers never share an issuer.

import { checkHttpUrl } from './shared.ts';
import type { Problems } from '../spec.ts';

/** The claim rules a provider may set for itself; unset ones are the `idp` section's. */
export interface ProviderClaimRules {
  readonly emailVerifiedClaim?: string;
  readonly requireVerifiedEmail?: boolean;
  readonly groupsClaim?: string;
  readonly requiredGroup?: string;
  readonly allowedEmailDomains?: readonly string[];
}

/** One entry of `idp.providers`, as configured. */
export interface ProviderEntry {
  readonly name: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly audience?: string;
  readonly jwksUrl?: string;
  readonly claims?: ProviderClaimRules;
  /** E-mail domains whose people sign in here (home-realm discovery), lowercase. */
  readonly domains: readonly string[];
}

/** The name the IDP_* variables' provider goes by. */
export const DEFAULT_PROVIDER_NAME = 'default';
/** A provider's name: it travels in URLs and forms, and labels the sign-in page's buttons. */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const MAX_PROVIDERS = 20;
const ENTRY_FIELDS = new Set(['name', 'issuer', 'clientId', 'clientSecret', 'audience', 'jwksUrl', 'claims', 'domains']);
const CLAIM_FIELDS = new Set(['emailVerifiedClaim', 'requireVerifiedEmail', 'groupsClaim', 'requiredGroup', 'allowedEmailDomains']);
const DOMAIN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function unknownFields(raw: Record<string, unknown>, known: ReadonlySet<string>, at: string, problems: Problems): void {
  for (const name of Object.keys(raw))
    if (!known.has(name)) problems.push(`${at}: unknown field "${name}" (fields: ${[...known].join(', ')})`);
}

function optionalText(raw: Record<string, unknown>, field: string, at: string, problems: Problems): string | undefined {
  const value = raw[field];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string' || value.length > 2048 || /[\x00-\x1f\x7f]/.test(value)) {
    problems.push(`${at}.${field} must be a string of at most 2048 characters, without control characters`);
    return undefined;
  }
  return value;
}

function domainList(value: unknown, at: string, problems: Problems): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((d) => typeof d === 'string' && DOMAIN.test(d.toLowerCase()))) {
    problems.push(`${at} must be a list of domain names (example: [example.com])`);
    return [];
  }
  return value.map((d: string) => d.toLowerCase());
}

function readClaims(raw: unknown, at: string, problems: Problems): ProviderClaimRules | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) {
    problems.push(`${at} must be a mapping of ${[...CLAIM_FIELDS].join(', ')}`);
    return undefined;
  }
  unknownFields(raw, CLAIM_FIELDS, at, problems);
  const rules: { -readonly [K in keyof ProviderClaimRules]: ProviderClaimRules[K] } = {};
  for (const field of ['emailVerifiedClaim', 'groupsClaim', 'requiredGroup'] as const) {
    const value = optionalText(raw, field, at, problems);
    if (value !== undefined) rules[field] = value;
  }
  if (raw.requireVerifiedEmail !== undefined) {
    if (typeof raw.requireVerifiedEmail === 'boolean') rules.requireVerifiedEmail = raw.requireVerifiedEmail;
    else problems.push(`${at}.requireVerifiedEmail must be true or false`);
  }
  if (raw.allowedEmailDomains !== undefined)
    rules.allowedEmailDomains = domainList(raw.allowedEmailDomains, `${at}.allowedEmailDomains`, problems);
  return rules;
}

function readEntry(raw: unknown, at: string, problems: Problems): ProviderEntry | undefined {
  if (!isObject(raw)) {
    problems.push(`${at} must be a mapping with name, issuer, clientId and optionally clientSecret, audience, jwksUrl, claims, domains`);
    return undefined;
  }
  const before = problems.length;
  unknownFields(raw, ENTRY_FIELDS, at, problems);
  const name = raw.name;
  if (typeof name !== 'string' || !PROVIDER_NAME.test(name))
    problems.push(`${at}.name must be 1-32 characters of lowercase letters, digits, '_' or '-', starting with a letter or digit`);
  const issuer = optionalText(raw, 'issuer', at, problems);
  if (issuer === undefined) problems.push(`${at}.issuer is required: the provider's exact \`iss\``);
  else checkHttpUrl(`${at}.issuer`, issuer, problems);
  const clientId = optionalText(raw, 'clientId', at, problems);
  if (clientId === undefined) problems.push(`${at}.clientId is required: the sidecar's client id at this provider`);
  const jwksUrl = optionalText(raw, 'jwksUrl', at, problems);
  if (jwksUrl !== undefined) checkHttpUrl(`${at}.jwksUrl`, jwksUrl, problems);
  const entry = {
    name: name as string,
    issuer: issuer ?? '',
    clientId: clientId ?? '',
    clientSecret: optionalText(raw, 'clientSecret', at, problems),
    audience: optionalText(raw, 'audience', at, problems),
    jwksUrl,
    claims: readClaims(raw.claims, `${at}.claims`, problems),
    domains: domainList(raw.domains, `${at}.domains`, problems),
  };
  if (problems.length > before) return undefined;
  return Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== undefined)) as unknown as ProviderEntry;
}

/** Reads `idp.providers`; every problem is reported, named by the entry's index. */
export function readProviders(raw: unknown, where: string, problems: Problems): readonly ProviderEntry[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_PROVIDERS) {
    problems.push(`${where} must be a list of 1 to ${MAX_PROVIDERS} identity providers (leave it out for the IDP_* provider alone)`);
    return undefined;
  }
  const before = problems.length;
  const entries: ProviderEntry[] = [];
  raw.forEach((item, i) => {
    const entry = readEntry(item, `${where}[${i}]`, problems);
    if (entry) entries.push(entry);
  });
  const names = new Set<string>();
  const issuers = new Set<string>();
  const domains = new Map<string, string>();
  for (const entry of entries) {
    if (names.has(entry.name)) problems.push(`${where}: the name "${entry.name}" is used by two providers`);
    // A person is (issuer, subject): two entries with one issuer would be one provider with two rule sets.
    if (issuers.has(entry.issuer)) problems.push(`${where}: the issuer ${entry.issuer} is named by two providers`);
    for (const domain of entry.domains) {
      const other = domains.get(domain);
      if (other !== undefined && other !== entry.name)
        problems.push(`${where}: the domain ${domain} is claimed by providers "${other}" and "${entry.name}"`);
      domains.set(domain, entry.name);
    }
    names.add(entry.name);
    issuers.add(entry.issuer);
  }
  return problems.length > before ? undefined : Object.freeze(entries.map((e) => Object.freeze(e)));
}
