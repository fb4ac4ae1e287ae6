// The failed-authentication limiter that the proxy listener, the OAuth endpoints and the admin listener
// share, counting under each address's limit key: an IPv6 client as its network (a /64 unless
// configured), an IPv4-mapped IPv6 address as its IPv4 address. Memory store, manual clock.

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/model/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { FailedAuthLimiter, isFailureRefusal, WindowLimit } from '../../src/http/rate-limits.ts';
import { MemoryTokenStore } from '../../src/store/memory.ts';

function limiter(perMinute: number, ipv6PrefixLength = 64): { limiter: FailedAuthLimiter; logs: string[] } {
  const clock = new ManualClock();
  const logs: string[] = [];
  const logger = createLogger(
    'debug',
    new Writable({
      write(chunk, _enc, done) {
        logs.push(String(chunk));
        done();
      },
    }),
    'json',
  );
  const store = new MemoryTokenStore({ clock });
  return {
    limiter: new FailedAuthLimiter(new WindowLimit(store, clock, 'authfail', perMinute), clock, logger, 'admin', ipv6PrefixLength),
    logs,
  };
}

/** Failures from `addresses` in turn until one is refused; the number of failures it took. */
async function failuresUntilRefused(l: FailedAuthLimiter, addresses: (i: number) => string, bound = 50): Promise<number> {
  for (let i = 1; i <= bound; i++) {
    try {
      await l.failed(addresses(i));
    } catch (err) {
      expect(isFailureRefusal(err)).toBe(true);
      return i;
    }
  }
  return Infinity;
}

describe('FailedAuthLimiter keys addresses on their limit key', () => {
  it('failures from ever new addresses of one /64 are refused together; the next /64 is not, and the log names the network', async () => {
    const { limiter: l, logs } = limiter(3);
    expect(await failuresUntilRefused(l, (i) => `2001:db8:1:2::${i}`)).toBe(5);
    expect(l.refusal('2001:db8:1:2:ffff::1')).toBeDefined();
    expect(l.refusal('2001:db8:1:3::1')).toBeUndefined();
    expect(logs.map((line) => JSON.parse(line) as Record<string, unknown>).find((e) => e.listener === 'admin')).toMatchObject({
      address: '2001:db8:1:2:0:0:0:0/64',
    });
  });

  it('an IPv4 address and its IPv4-mapped forms are one host', async () => {
    const { limiter: l } = limiter(2);
    const forms = ['198.51.100.7', '::ffff:198.51.100.7', '::ffff:c633:6407'];
    expect(await failuresUntilRefused(l, (i) => forms[i % 3]!)).toBe(4);
    expect(l.refusal('198.51.100.8')).toBeUndefined();
  });

  it('with a prefix length of 128 each IPv6 address counts alone', async () => {
    const { limiter: l } = limiter(2, 128);
    expect(await failuresUntilRefused(l, (i) => `2001:db8:1:2::${i}`, 20)).toBe(Infinity);
    expect(await failuresUntilRefused(l, () => '2001:db8:1:2::ff')).toBe(4);
  });
});
