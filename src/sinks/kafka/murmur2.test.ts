import { describe, expect, it } from 'vitest';
import { murmur2 as clientMurmur2 } from '../../../test/support/kafka-client.js';
import fc from 'fast-check';
import { murmur2, murmur2Ascii } from './murmur2.js';

describe("a key's partition hash", () => {
  it("is the client's murmur2 of the key, unsigned, for any bytes", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 70 }), (key) => murmur2(key) === clientMurmur2(Buffer.from(key)) >>> 0));
  });

  it('is the same hashed from an ASCII range of a string, without a buffer', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme-ascii', maxLength: 70 }), fc.string({ maxLength: 5 }), (key, around) => {
        const text = `${around}${key}${around}`;
        return murmur2Ascii(text, around.length, around.length + key.length) === clientMurmur2(Buffer.from(key)) >>> 0;
      }),
    );
    expect(murmur2Ascii('ship-001', 0, 8)).toBe(clientMurmur2(Buffer.from('ship-001')) >>> 0);
  });
});
