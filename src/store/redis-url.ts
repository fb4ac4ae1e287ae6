// REDIS_URL: which topology it names (standalone, Sentinel, Cluster), and how it is shown without its
// credentials. Pure (no ioredis), so the config validator can use it without loading a Redis client.

export interface RedisHost {
  host: string;
  port: number;
}

interface Credentials {
  password?: string;
  username?: string;
}

export type ParsedRedisUrl =
  /** ioredis parses a standalone URL itself (user, password, db, TLS); it is only validated here. */
  | { mode: 'standalone'; url: string }
  | ({ mode: 'sentinel'; sentinels: RedisHost[]; name: string; db: number; tls: boolean } & Credentials)
  | ({ mode: 'cluster'; nodes: RedisHost[]; tls: boolean } & Credentials);

/**
 * Accepted URL forms:
 * - `redis://[user:pass@]host:port[/db]`, `rediss://...` (TLS)
 * - `redis+sentinel://[user:pass@]host1:port1,host2:port2/<masterName>[/db]` (`rediss+sentinel` for TLS)
 * - `redis+cluster://[user:pass@]host1:port1,host2:port2` (`rediss+cluster` for TLS)
 *
 * User and password are percent-decoded; the password is everything after the first `:` of the
 * user information (it may itself contain `:`). Throws an Error naming what is wrong, never the
 * credentials.
 */
export function parseRedisUrl(url: string): ParsedRedisUrl {
  const match = /^(rediss?)(\+sentinel|\+cluster)?:\/\/(.*)$/.exec(url);
  if (!match) throw new Error('REDIS_URL must start with redis://, rediss://, redis+sentinel:// or redis+cluster://');
  const [, scheme, variant, rest = ''] = match;
  if (!variant) {
    try {
      new URL(url);
    } catch {
      // The URL's own message would repeat the input, credentials included.
      throw new Error('REDIS_URL is not a valid URL');
    }
    return { mode: 'standalone', url };
  }
  const at = rest.lastIndexOf('@');
  const auth = at >= 0 ? rest.slice(0, at) : '';
  const afterAuth = at >= 0 ? rest.slice(at + 1) : rest;
  const slash = afterAuth.indexOf('/');
  const hostList = slash >= 0 ? afterAuth.slice(0, slash) : afterAuth;
  const path = slash >= 0 ? afterAuth.slice(slash + 1) : '';
  const hosts = hostList.split(',').filter(Boolean).map(parseHost);
  if (hosts.length === 0) throw new Error('REDIS_URL names no host');
  const creds = parseCredentials(auth);
  const tls = scheme === 'rediss';
  if (variant === '+cluster') return { mode: 'cluster', nodes: hosts, tls, ...creds };
  const [name, db, ...extra] = path.split('/');
  if (!name) throw new Error('REDIS_URL for Sentinel must end with /<masterName>');
  if (extra.length > 0 || (db !== undefined && !/^\d{1,2}$/.test(db)))
    throw new Error('REDIS_URL for Sentinel must end with /<masterName> or /<masterName>/<db number>');
  return { mode: 'sentinel', sentinels: hosts, name, db: Number(db ?? 0), tls, ...creds };
}

function parseHost(hostPort: string): RedisHost {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^[\]:]+)):(\d{1,5})$/.exec(hostPort);
  const port = Number(m?.[3]);
  if (!m || port < 1 || port > 65535) throw new Error(`REDIS_URL host "${hostPort}" must be host:port (IPv6 as [addr]:port, port 1-65535)`);
  return { host: (m[1] ?? m[2])!, port };
}

function parseCredentials(auth: string): Credentials {
  if (auth === '') return {};
  const colon = auth.indexOf(':');
  const user = colon >= 0 ? auth.slice(0, colon) : auth;
  const pass = colon >= 0 ? auth.slice(colon + 1) : undefined;
  const creds: Credentials = {};
  try {
    if (user) creds.username = decodeURIComponent(user);
    if (pass) creds.password = decodeURIComponent(pass);
  } catch {
    throw new Error('REDIS_URL user or password is not valid percent-encoding');
  }
  return creds;
}

/**
 * The URL as it may be logged or printed: everything between `//` and the last `@` (user and
 * password, even when the password holds an unencoded `@` or `/`) becomes `***`.
 */
export function redactRedisUrl(url: string): string {
  const start = url.indexOf('//');
  if (start < 0) return url;
  const at = url.lastIndexOf('@');
  if (at < start) return url;
  return `${url.slice(0, start + 2)}***${url.slice(at)}`;
}
