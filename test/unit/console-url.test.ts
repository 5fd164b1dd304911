import { describe, expect, it } from 'vitest';
import { consoleUrl } from '../../scripts/lib/console-url.mjs';

describe('the console address `npm run local` prints', () => {
  it('is localhost for loopback and every address, the address itself otherwise, IPv6 in brackets', () => {
    expect(consoleUrl('127.0.0.1', 8443)).toBe('https://localhost:8443/console/');
    expect(consoleUrl('::1', 8443)).toBe('https://localhost:8443/console/');
    expect(consoleUrl('0.0.0.0', '8443')).toBe('https://localhost:8443/console/');
    expect(consoleUrl('::', 8443)).toBe('https://localhost:8443/console/');
    expect(consoleUrl('192.0.2.2', 8443)).toBe('https://192.0.2.2:8443/console/');
    expect(consoleUrl('fd00::2', 8443)).toBe('https://[fd00::2]:8443/console/');
  });
});
