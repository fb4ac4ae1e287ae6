// One address module: the SSRF guard's classifier (every special-purpose range of both families,
// addresses just inside and just outside each boundary, IPv4 embedded in IPv6 judged on the IPv4 it
// reaches), the loopback rule every caller shares, CIDRs, X-Forwarded-For's `host:port` forms, and the
// key a per-address limit counts an address under.

import { describe, expect, it } from 'vitest';
import {
  addressList,
  addressWithOptionalPort,
  classifyAddress,
  inAddressList,
  isLoopbackHost,
  isLoopbackOrPrivate,
  limitKey,
  parseCidr,
  type AddressClass,
} from '../../src/model/net-address.ts';

const IPV4: Array<[string, AddressClass]> = [
  ['0.0.0.0', 'unspecified'],
  ['0.0.0.1', 'this-network'],
  ['0.255.255.255', 'this-network'],
  ['1.0.0.0', 'public'],
  ['9.255.255.255', 'public'],
  ['10.0.0.0', 'private'],
  ['10.255.255.255', 'private'],
  ['11.0.0.0', 'public'],
  ['100.63.255.255', 'public'],
  ['100.64.0.0', 'shared'],
  ['100.127.255.255', 'shared'],
  ['100.128.0.0', 'public'],
  ['126.255.255.255', 'public'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['128.0.0.0', 'public'],
  ['169.253.255.255', 'public'],
  ['169.254.0.1', 'link-local'],
  ['169.254.169.254', 'link-local'],
  ['169.255.0.0', 'public'],
  ['172.15.255.255', 'public'],
  ['172.16.0.0', 'private'],
  ['172.31.255.255', 'private'],
  ['172.32.0.0', 'public'],
  ['192.0.0.8', 'reserved'],
  ['192.0.1.0', 'public'],
  ['192.0.2.1', 'documentation'],
  ['192.0.3.0', 'public'],
  ['192.88.99.1', 'reserved'],
  ['192.167.255.255', 'public'],
  ['192.168.0.0', 'private'],
  ['192.168.255.255', 'private'],
  ['192.169.0.0', 'public'],
  ['198.17.255.255', 'public'],
  ['198.18.0.0', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['198.20.0.0', 'public'],
  ['198.51.100.7', 'documentation'],
  ['203.0.113.255', 'documentation'],
  ['203.0.114.0', 'public'],
  ['8.8.8.8', 'public'],
  ['223.255.255.255', 'public'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.255', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.254', 'reserved'],
  ['255.255.255.255', 'broadcast'],
];

const IPV6: Array<[string, AddressClass]> = [
  ['::', 'unspecified'],
  ['0:0:0:0:0:0:0:0', 'unspecified'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['[::1]', 'loopback'],
  // IPv4-mapped: judged on the IPv4 address, in dotted and in hex form.
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::FFFF:7F00:0001', 'loopback'],
  ['::ffff:10.1.2.3', 'private'],
  ['::ffff:169.254.169.254', 'link-local'],
  ['::ffff:100.64.0.1', 'shared'],
  ['::ffff:0.0.0.0', 'unspecified'],
  ['::ffff:8.8.8.8', 'public'],
  ['0:0:0:0:0:ffff:c0a8:0101', 'private'],
  // IPv4-translated and IPv4-compatible forms.
  ['::ffff:0:127.0.0.1', 'loopback'],
  ['::ffff:0:8.8.8.8', 'public'],
  ['::127.0.0.1', 'loopback'],
  ['::192.168.1.1', 'private'],
  ['::8.8.8.8', 'public'],
  // NAT64 well-known prefix: judged on the embedded IPv4.
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::a00:1', 'private'],
  ['64:ff9b::169.254.169.254', 'link-local'],
  ['64:ff9b::8.8.8.8', 'public'],
  ['64:ff9b:1::1', 'private'],
  ['100::1', 'reserved'],
  ['fc00::1', 'private'],
  ['fd12:3456:789a::1', 'private'],
  ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'private'],
  ['fbff:ffff::1', 'reserved'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['febf:ffff::1', 'link-local'],
  ['fec0::1', 'private'],
  ['ff02::1', 'multicast'],
  ['ff0e::101', 'multicast'],
  ['2001:db8::1', 'documentation'],
  ['2001:db8:ffff::1', 'documentation'],
  ['2001:db9::1', 'public'],
  ['3fff::1', 'documentation'],
  ['3fff:fff::1', 'documentation'],
  ['3fff:1000::1', 'public'],
  ['2001:2::1', 'benchmarking'],
  ['2001:2:1::1', 'reserved'],
  ['2001::1', 'reserved'],
  ['2001:1ff::1', 'reserved'],
  ['2001:200::1', 'public'],
  ['2002:7f00:1::1', 'reserved'],
  ['2606:4700:4700::1111', 'public'],
  ['2a00:1450:4001:80b::200e', 'public'],
  ['1fff:ffff::1', 'reserved'],
  ['4000::1', 'reserved'],
  ['5f00::1', 'reserved'],
];

describe('classifyAddress', () => {
  it.each(IPV4)('IPv4 %s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  it.each(IPV6)('IPv6 %s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  it.each(['', 'localhost', '127.1', '1.2.3', '01.2.3.4', '::ffff:1.2.3.4.5', 'fe80:::1', '[::1', 'example.com'])(
    'refuses what is not an IP address: %j',
    (text) => {
      expect(classifyAddress(text)).toBe('invalid');
    },
  );
});

describe('isLoopbackHost', () => {
  it.each([
    'localhost',
    'LocalHost',
    '127.0.0.1',
    '127.0.0.2',
    '127.255.255.254',
    '::1',
    '[::1]',
    '0:0:0:0:0:0:0:1',
    '::ffff:127.0.0.2',
    '[::ffff:7f00:2]',
  ])('%s is loopback', (host) => {
    expect(isLoopbackHost(host)).toBe(true);
  });

  it.each(['app.localhost', 'localhost.evil.example', '128.0.0.1', '10.0.0.1', '0.0.0.0', '::', '::2', '[::1', 'fe80::1', '', '127.1'])(
    '%s is not',
    (host) => {
      expect(isLoopbackHost(host)).toBe(false);
    },
  );
});

describe('isLoopbackOrPrivate', () => {
  it.each([
    '127.0.0.2',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    'fd00::1',
    'fe80::1',
    '::ffff:10.0.0.1',
    'localhost',
  ])('%s is', (host) => {
    expect(isLoopbackOrPrivate(host)).toBe(true);
  });

  it.each(['8.8.8.8', '2606:4700:4700::1111', '0.0.0.0', '::', '192.0.2.1', 'example.com'])('%s is not', (host) => {
    expect(isLoopbackOrPrivate(host)).toBe(false);
  });
});

describe('parseCidr', () => {
  it.each<[string, { address: string; prefix: number; family: 'ipv4' | 'ipv6' }]>([
    ['10.0.0.0/8', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    ['192.168.1.1', { address: '192.168.1.1', prefix: 32, family: 'ipv4' }],
    ['0.0.0.0/0', { address: '0.0.0.0', prefix: 0, family: 'ipv4' }],
    ['fd00::/8', { address: 'fd00::', prefix: 8, family: 'ipv6' }],
    ['::1', { address: '::1', prefix: 128, family: 'ipv6' }],
  ])('%s', (entry, expected) => {
    expect(parseCidr(entry)).toEqual(expected);
  });

  it.each(['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0.0/x', '10.0.0.0/-1', '10.0.0.256', 'example.com/8', '', '/8', '[::1]/128'])(
    '%j is not a CIDR',
    (entry) => {
      expect(parseCidr(entry)).toBeUndefined();
    },
  );

  it('addressList matches what the entries cover, the IPv4-mapped form of an IPv4 entry included, and refuses an invalid entry', () => {
    const list = addressList(['10.0.0.0/8', '2001:db8::1']);
    expect(inAddressList(list, '10.255.0.1')).toBe(true);
    expect(inAddressList(list, '::ffff:10.0.0.1')).toBe(true);
    expect(inAddressList(list, '11.0.0.1')).toBe(false);
    expect(inAddressList(list, '2001:db8::1')).toBe(true);
    expect(inAddressList(list, '2001:db8::2')).toBe(false);
    expect(inAddressList(list, 'not-an-ip')).toBe(false);
    expect(() => addressList(['10.0.0.0/33'])).toThrow(TypeError);
  });
});

// X-Forwarded-For entries as ingresses write them: a bare address, or (Azure Application Gateway, IIS
// ARR) the address with the client's source port, `[IPv6]:port` for IPv6.
describe('addressWithOptionalPort', () => {
  it.each<[string, string]>([
    ['203.0.113.5', '203.0.113.5'],
    ['203.0.113.5:4711', '203.0.113.5'],
    [' 203.0.113.5:4711 ', '203.0.113.5'],
    ['2001:db8::1', '2001:db8::1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['[2001:db8::1]:443', '2001:db8::1'],
    ['::ffff:203.0.113.5', '203.0.113.5'],
    ['[::ffff:203.0.113.5]:80', '203.0.113.5'],
    ['203.0.113.5:0', '203.0.113.5'],
    ['203.0.113.5:65535', '203.0.113.5'],
  ])('%j -> %s', (entry, expected) => {
    expect(addressWithOptionalPort(entry)).toBe(expected);
  });

  it.each([
    '',
    'unknown',
    '_hidden',
    'client.example',
    'client.example:80',
    '203.0.113.5:',
    '203.0.113.5:65536',
    '203.0.113.5:http',
    '203.0.113.5:80:1',
    '[203.0.113.5]:80',
    '[2001:db8::1',
    '[2001:db8::1]x',
    '[2001:db8::1]:',
    '2001:db8::1]:443',
    '999.0.0.1:80',
  ])('%j is not an address', (entry) => {
    expect(addressWithOptionalPort(entry)).toBeUndefined();
  });
});

describe('limitKey', () => {
  it.each<[string, string]>([
    // IPv4, and IPv4-mapped IPv6 in both spellings (a dual-stack socket's, and a proxy's hex form): the host.
    ['203.0.113.5', '203.0.113.5'],
    ['::ffff:203.0.113.5', '203.0.113.5'],
    ['::ffff:cb00:7105', '203.0.113.5'],
    ['[::FFFF:203.0.113.5]', '203.0.113.5'],
    // IPv6: the /64 it is in, whichever of its addresses, however written.
    ['2001:db8:1:2::1', '2001:db8:1:2:0:0:0:0/64'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2:0:0:0:0/64'],
    ['2001:0DB8:0001:0002:0000:0000:0000:0abc', '2001:db8:1:2:0:0:0:0/64'],
    ['[2001:db8:1:2::abc]', '2001:db8:1:2:0:0:0:0/64'],
    ['2001:db8:1:2::203.0.113.5', '2001:db8:1:2:0:0:0:0/64'],
    ['fe80::1%eth0', 'fe80:0:0:0:0:0:0:0/64'],
    ['::1', '0:0:0:0:0:0:0:0/64'],
    // The neighbouring /64 is another key.
    ['2001:db8:1:3::1', '2001:db8:1:3:0:0:0:0/64'],
    // Not an address (a socket without a peer address): unchanged.
    ['', ''],
    ['unknown', 'unknown'],
  ])('%j counts as %j', (address, key) => {
    expect(limitKey(address)).toBe(key);
    expect(limitKey(address, 64)).toBe(key);
  });

  it('the prefix length is configurable: 128 is each address, 48 a site, 56 cuts within a group', () => {
    expect(limitKey('2001:db8:1:2::1', 128)).toBe('2001:db8:1:2:0:0:0:1/128');
    expect(limitKey('2001:db8:1:2::2', 128)).toBe('2001:db8:1:2:0:0:0:2/128');
    expect(limitKey('2001:db8:1:2::1', 48)).toBe('2001:db8:1:0:0:0:0:0/48');
    expect(limitKey('2001:db8:1:ffff::1', 48)).toBe('2001:db8:1:0:0:0:0:0/48');
    expect(limitKey('2001:db8:1:2ab::1', 56)).toBe('2001:db8:1:200:0:0:0:0/56');
    expect(limitKey('203.0.113.5', 128)).toBe('203.0.113.5');
  });

  it('a key is its own key (callers that key an address already keyed get the same count)', () => {
    for (const address of ['2001:db8:1:2::1', '203.0.113.5', '::ffff:203.0.113.5'])
      expect(limitKey(limitKey(address))).toBe(limitKey(address));
  });
});
