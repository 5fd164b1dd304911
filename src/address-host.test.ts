import { describe, expect, it } from 'vitest';
import { hostOf, isLoopbackHost } from './address-host.js';

describe('hostOf', () => {
  it('names an IPv4 address however it is written, and an IPv6 address by its /64', () => {
    expect(hostOf('198.51.100.7')).toBe('198.51.100.7');
    expect(hostOf('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(hostOf('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(hostOf('2001:0DB8:0:0:ffff::9%eth0')).toBe('2001:db8:0:0::/64');
    expect(hostOf('64:ff9b::198.51.100.7')).toBe('64:ff9b:0:0::/64');
  });

  it('keeps what is no address as it is', () => {
    expect(hostOf('')).toBe('');
    expect(hostOf('not:an:address::x')).toBe('not:an:address::x');
  });
});

describe('isLoopbackHost', () => {
  it('knows the loopback addresses however they are written, and no other', () => {
    for (const address of ['127.0.0.1', '127.8.9.10', '::ffff:127.0.0.1', '::1']) expect(isLoopbackHost(hostOf(address))).toBe(true);
    for (const address of ['198.51.100.7', '::ffff:10.0.0.1', '2001:db8::1', 'fe80::1'])
      expect(isLoopbackHost(hostOf(address))).toBe(false);
  });
});
