import type { NetworkInterfaceInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { gatewayAddresses, httpsUrl } from './console-addresses.js';

const nic = (address: string, family: 'IPv4' | 'IPv6', internal = false) => ({ address, family, internal }) as NetworkInterfaceInfo;
const board = {
  lo: [nic('127.0.0.1', 'IPv4', true), nic('::1', 'IPv6', true)],
  eth0: [nic('192.0.2.2', 'IPv4'), nic('fd00::2', 'IPv6'), nic('fe80::1', 'IPv6')],
};

describe('where devices reach the gateway', () => {
  it('is the address it listens on when it is bound to one: loopback says this machine only', () => {
    expect(gatewayAddresses('127.0.0.1', '127.0.0.1', board)).toEqual({ hosts: ['127.0.0.1'], thisMachineOnly: true });
    expect(gatewayAddresses('127.0.0.1', 'localhost', board)).toEqual({ hosts: ['127.0.0.1'], thisMachineOnly: true });
    expect(gatewayAddresses('::1', '[::1]', board)).toEqual({ hosts: ['[::1]'], thisMachineOnly: true });
    expect(gatewayAddresses('192.0.2.2', '127.0.0.1', board)).toEqual({ hosts: ['192.0.2.2'], thisMachineOnly: false });
    expect(gatewayAddresses('fd00::2', undefined, board)).toEqual({ hosts: ['[fd00::2]'], thisMachineOnly: false });
  });

  it("is the name or address the browser used, unless that is the machine itself, then the board's own of the family it listens on", () => {
    expect(gatewayAddresses('0.0.0.0', 'gateway.local', board).hosts).toEqual(['gateway.local']);
    expect(gatewayAddresses('0.0.0.0', '[fd00::2]', board).hosts).toEqual(['[fd00::2]']);
    expect(gatewayAddresses('0.0.0.0', '127.0.0.1', board)).toEqual({ hosts: ['192.0.2.2'], thisMachineOnly: false });
    // Link-local addresses need an interface a URL cannot name.
    expect(gatewayAddresses('::', 'localhost', board).hosts).toEqual(['192.0.2.2', '[fd00::2]']);
    expect(gatewayAddresses('0.0.0.0', undefined, { lo: board.lo }).hosts).toEqual(['localhost']);
  });

  it('puts an IPv6 address in brackets in a URL', () => {
    expect(httpsUrl('fd00::2', 8443)).toBe('https://[fd00::2]:8443');
    expect(httpsUrl('[fd00::2]', 8443)).toBe('https://[fd00::2]:8443');
    expect(httpsUrl('192.0.2.2', 443)).toBe('https://192.0.2.2:443');
  });
});
