// The client address every per-address decision uses: the TCP peer, or what a trusted proxy appended
// last to X-Forwarded-For. A client must never choose its own address by sending the header.

import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { normalizeAddress } from '../../src/model/net-address.ts';
import { clientAddresses } from '../../src/http/client-address.ts';

function request(remoteAddress: string | undefined, xff?: string): IncomingMessage {
  return { socket: { remoteAddress }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } } as unknown as IncomingMessage;
}

describe('clientAddresses', () => {
  const behindIngress = clientAddresses(['10.0.0.0/8', '192.168.1.1', 'fd00::/8']);

  it.each<[string, string | undefined, string | undefined, string]>([
    ['a trusted proxy: the last entry it appended', '10.1.2.3', '203.0.113.9', '203.0.113.9'],
    ['a chain: the last entry, not the client-written first one', '10.1.2.3', '1.1.1.1, 198.51.100.7', '198.51.100.7'],
    ['spaces around the last entry', '10.1.2.3', '1.1.1.1 ,  198.51.100.7  ', '198.51.100.7'],
    ['an IPv6 last entry', '10.1.2.3', '2001:db8::5', '2001:db8::5'],
    ['a trusted single address', '192.168.1.1', '203.0.113.9', '203.0.113.9'],
    ['a trusted IPv6 subnet', 'fd00::1', '203.0.113.9', '203.0.113.9'],
    ['a trusted proxy as IPv4-mapped IPv6', '::ffff:10.1.2.3', '203.0.113.9', '203.0.113.9'],
    ['an untrusted peer: its header is ignored', '203.0.113.50', '10.0.0.1', '203.0.113.50'],
    ['an untrusted neighbour of a trusted address', '192.168.1.2', '10.0.0.1', '192.168.1.2'],
    ['a trusted proxy without the header', '10.1.2.3', undefined, '10.1.2.3'],
    ['a last entry that is not an address', '10.1.2.3', '203.0.113.9, unknown', '10.1.2.3'],
    // Azure Application Gateway appends the client's address with its source port, `IP:port`, and
    // `[IPv6]:port` for IPv6 (its documented X-Forwarded-For format); IIS's ARR can do the same.
    ['an IPv4 last entry with a port', '10.1.2.3', '203.0.113.5:4711', '203.0.113.5'],
    ['an IPv4 last entry with a port after a chain', '10.1.2.3', '1.1.1.1, 203.0.113.5:4711', '203.0.113.5'],
    ['a bracketed IPv6 last entry with a port', '10.1.2.3', '[2001:db8::1]:443', '2001:db8::1'],
    ['a bracketed IPv6 last entry', '10.1.2.3', '[2001:db8::5]', '2001:db8::5'],
    ['an IPv4-mapped last entry is the IPv4 address', '10.1.2.3', '::ffff:203.0.113.9', '203.0.113.9'],
    ['an upper-case IPv6 last entry is written in lower case (one bucket per address)', '10.1.2.3', '2001:DB8::5', '2001:db8::5'],
    ['a port out of range', '10.1.2.3', '203.0.113.9:65536', '10.1.2.3'],
    ['an empty port', '10.1.2.3', '203.0.113.9:', '10.1.2.3'],
    ['a port that is not a number', '10.1.2.3', '203.0.113.9:http', '10.1.2.3'],
    ['a name with a port', '10.1.2.3', 'client.example:4711', '10.1.2.3'],
    ['an unbracketed IPv6 address cannot carry a port', '10.1.2.3', '2001:db8::1:443:1:2:3:4:5', '10.1.2.3'],
    ['a bracketed IPv4 address', '10.1.2.3', '[203.0.113.9]:80', '10.1.2.3'],
    ['text after the bracket', '10.1.2.3', '[2001:db8::1]x', '10.1.2.3'],
    ['an empty last entry', '10.1.2.3', '203.0.113.9,', '10.1.2.3'],
    ['an empty header', '10.1.2.3', '', '10.1.2.3'],
  ])('%s', (_label, peer, xff, expected) => {
    expect(behindIngress.client(request(peer, xff))).toBe(expected);
  });

  it('with no trusted proxies the header is never read', () => {
    const direct = clientAddresses([]);
    expect(direct.client(request('203.0.113.50', '10.0.0.1'))).toBe('203.0.113.50');
    expect(direct.trusts('10.0.0.1')).toBe(false);
    expect(direct.trusts('127.0.0.1')).toBe(false);
  });

  it('trusts only the configured families and ranges', () => {
    expect(behindIngress.trusts('10.255.255.255')).toBe(true);
    expect(behindIngress.trusts('11.0.0.0')).toBe(false);
    expect(behindIngress.trusts('::1')).toBe(false);
    expect(behindIngress.trusts('fe80::1')).toBe(false);
    expect(behindIngress.trusts('')).toBe(false);
    expect(clientAddresses(['0.0.0.0/0']).trusts('2001:db8::1')).toBe(false);
  });

  it('a socket without an address (already closed) is the empty address, never trusted', () => {
    expect(behindIngress.peer(request(undefined))).toBe('');
    expect(behindIngress.client(request(undefined, '203.0.113.9'))).toBe('');
  });
});

describe('normalizeAddress', () => {
  it.each([
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['192.0.2.1', '192.0.2.1'],
    ['::1', '::1'],
    ['::ffff:c000:201', '::ffff:c000:201'],
    ['', ''],
  ])('%j -> %j', (input, expected) => {
    expect(normalizeAddress(input)).toBe(expected);
  });

  it('undefined is the empty address', () => {
    expect(normalizeAddress(undefined)).toBe('');
  });
});
