import { describe, expect, it } from 'vitest';
import { murmur2 } from '@platformatic/kafka';
import fc from 'fast-check';
import { ShipKeys } from './ship-keys.js';
import { recordOf, retainedHeapBytes } from '../../../test/support/retained-heap.js';

describe("a ship's message key and partition, made once", () => {
  it("hashes every key as the client's default partitioner does (murmur2 of the key, unsigned)", () => {
    const keys = new ShipKeys(murmur2);
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 64 }), (shipId) => {
        const key = keys.keyOf(shipId);
        const expected = murmur2(Buffer.from(shipId)) >>> 0;
        return key.equals(Buffer.from(shipId)) && keys.hashOf(key) === expected;
      }),
    );
  });

  it('keeps no queue record alive through a ship id sliced from it', () => {
    const keys = new ShipKeys(murmur2);
    const retained = retainedHeapBytes(() => {
      for (let s = 0; s < 20; s++) {
        const record = recordOf(`1\tvessel-with-a-long-name-${s}\tc\t1`, 1e6);
        keys.keyOf(record.slice(2, record.indexOf('\t', 2)));
      }
    });
    expect(retained).toBeLessThan(4 * 1024 * 1024);
  });

  it('gives a ship the same key buffer each time, and hashes a key it did not make', () => {
    const keys = new ShipKeys(murmur2);
    expect(keys.keyOf('MV Aurora')).toBe(keys.keyOf('MV Aurora'));
    const foreign = Buffer.from('MV Borealis');
    expect(keys.hashOf(foreign)).toBe(murmur2(foreign) >>> 0);
  });

  it('starts again past ten thousand ships, still placing them right', () => {
    const keys = new ShipKeys(murmur2);
    const first = keys.keyOf('ship-0');
    for (let i = 1; i <= 10_000; i++) keys.keyOf(`ship-${i}`);
    const again = keys.keyOf('ship-0');
    expect(again).not.toBe(first);
    expect(keys.hashOf(again)).toBe(murmur2(again) >>> 0);
  });
});
