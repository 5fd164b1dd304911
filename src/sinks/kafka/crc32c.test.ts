import { describe, expect, it } from 'vitest';
import { jsCRC32C } from '../../../test/support/kafka-client.js';
import fc from 'fast-check';
import { crc32c } from './crc32c.js';

const bytes = (length: number, at: (i: number) => number): Buffer => Buffer.from(Array.from({ length }, (_, i) => at(i)));

describe('CRC-32C', () => {
  it('gives the check value of "123456789" and the test vectors of RFC 3720 (iSCSI), appendix B.4', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(bytes(32, () => 0))).toBe(0x8a9136aa);
    expect(crc32c(bytes(32, () => 0xff))).toBe(0x62a8ab43);
    expect(crc32c(bytes(32, (i) => i))).toBe(0x46dd794e);
    expect(crc32c(bytes(32, (i) => 31 - i))).toBe(0x113fdb5c);
    expect(crc32c(Buffer.alloc(0))).toBe(0);
  });

  it('agrees with a byte-at-a-time CRC-32C on any bytes and any range of them', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300, size: 'max' }), fc.nat(), fc.nat(), (data, a, b) => {
        const start = data.length === 0 ? 0 : a % data.length;
        const end = start + (data.length === 0 ? 0 : b % (data.length - start + 1));
        return crc32c(data, start, end) === jsCRC32C(Buffer.from(data.subarray(start, end)));
      }),
    );
  });

  it('agrees with it on bytes that start anywhere in their memory (words are read from the first 4-byte boundary)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300, size: 'max' }), fc.integer({ min: 0, max: 7 }), (data, offset) => {
        const shifted = new Uint8Array(new ArrayBuffer(offset + data.length), offset);
        shifted.set(data);
        return crc32c(shifted) === jsCRC32C(Buffer.from(data));
      }),
    );
  });
});
