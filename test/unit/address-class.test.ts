// The SSRF guard's address classifier: every special-purpose range of both families, addresses just
// inside and just outside each boundary, and IPv4 embedded in IPv6 judged on the IPv4 it reaches.

import { describe, expect, it } from 'vitest';
import { classifyAddress, type AddressClass } from '../../src/oauth/address-class.ts';

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
