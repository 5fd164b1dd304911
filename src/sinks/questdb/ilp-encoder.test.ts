import { SenderBufferV2 } from '@questdb/nodejs-client';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anyCodePoint } from '../../../test/support/code-points.js';
import { propertyRuns } from '../../../test/support/property-sizes.js';
import type { QueuedReading } from '../../queue/record-codec.js';
import { RecordCorruptError, encodeRecord } from '../../queue/record-codec.js';
import { ReceiveClock } from '../../reading/receive-clock.js';
import { IlpEncoder } from './ilp-encoder.js';
import { recordOf, retainedHeapBytes } from '../../../test/support/retained-heap.js';

const SITE = 'pier 7';

/** What QuestDB's own Node.js client writes for the same rows (row i of site `sites[i]`, else SITE): the oracle. */
function clientEncode(table: string, rows: readonly QueuedReading[], sites: readonly (string | undefined)[] = []): Buffer {
  const buffer = new SenderBufferV2({ protocol: 'http', init_buf_size: 1024, max_buf_size: 1 << 28 });
  rows.forEach((row, i) => {
    buffer
      .table(table)
      .symbol('ship_id', row.shipId)
      .symbol('cargo_id', row.cargoId)
      .symbol('site', sites[i] ?? SITE)
      .floatColumn('value', row.value);
    buffer.at(BigInt(row.timeNs), 'ns');
  });
  return buffer.toBufferNew() ?? Buffer.alloc(0);
}

/** Queue records of these rows, as encodeRecord writes them, with their sites. */
const queued = (records: readonly QueuedReading[][], sites: readonly (string | undefined)[] = []) =>
  records.map((rows, i) => ({ payload: encodeRecord(rows, new ReceiveClock()), ...(sites[i] === undefined ? {} : { site: sites[i] }) }));

const special = fc.constantFrom(' ', ',', '=', '\\', '"', '\n', '\r', '\t', 'é', '😀', '港', '\u0000', '#');
const id = fc.oneof(
  fc.string({ unit: anyCodePoint, minLength: 1, maxLength: 30 }),
  fc.array(fc.oneof(special, fc.string({ minLength: 1, maxLength: 3 })), { minLength: 1, maxLength: 12 }).map((parts) => parts.join('')),
);
const row = fc.record({
  timeNs: fc.bigInt({ min: 0n, max: 9_223_372_036_854_775_807n }).map(String),
  shipId: id,
  cargoId: id,
  value: fc.oneof(
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(-0, 0, 5e-324, -5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 2.2250738585072014e-308),
  ),
});

describe('IlpEncoder', () => {
  it('writes byte for byte what the QuestDB client writes', () => {
    const encoder = new IlpEncoder('cargo_data', SITE);
    const site = fc.option(id, { nil: undefined });
    fc.assert(
      fc.property(fc.array(fc.tuple(row, site), { minLength: 1, maxLength: 30 }), (pairs) => {
        const rows = pairs.map(([r]) => r);
        const sites = pairs.map(([, s]) => s);
        expect(encoder.encode(rows, 0, rows.length, sites).equals(clientEncode('cargo_data', rows, sites))).toBe(true);
      }),
      { numRuns: propertyRuns(3000) },
    );
  });

  it('encodes queue records straight from their text to the same bytes', () => {
    const encoder = new IlpEncoder('cargo_data', SITE);
    const recordRow = fc.record({
      timeNs: fc.bigInt({ min: 0n, max: 9_183_110_399_999_999_999n }).map(String),
      shipId: id.filter((s) => !/\p{Cc}/u.test(s)),
      cargoId: id.filter((s) => !/\p{Cc}/u.test(s)),
      value: fc.double({ noNaN: true, noDefaultInfinity: true }),
    });
    const site = fc.option(fc.constantFrom('a', 'b b', SITE, 'c,=\\'), { nil: undefined });
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.array(recordRow, { minLength: 1, maxLength: 10 }), site), { minLength: 1, maxLength: 5 }),
        (pairs) => {
          const records = pairs.map(([rows]) => rows);
          const sites = pairs.map(([, s]) => s);
          const rowSites = pairs.flatMap(([rows, s]) => rows.map(() => s));
          expect(encoder.encodeRecords(queued(records, sites)).equals(clientEncode('cargo_data', records.flat(), rowSites))).toBe(true);
        },
      ),
      { numRuns: propertyRuns(1000) },
    );
    expect(() => encoder.encodeRecords([{ payload: '1\ts\tc\t1' }, { payload: 'x\ts\tc\t1' }])).toThrow(RecordCorruptError);
  });

  it('encodes a sub-range and grows its buffer for large batches', () => {
    const encoder = new IlpEncoder('t', SITE);
    const rows = Array.from({ length: 30_000 }, (_, i) => ({
      timeNs: String(1_700_000_000_000_000_000n + BigInt(i)),
      shipId: `ship ${i % 7}`,
      cargoId: 'c=1',
      value: i / 3,
    }));
    expect(encoder.encode(rows).equals(clientEncode('t', rows))).toBe(true);
    expect(encoder.encode(rows, 10, 20).equals(clientEncode('t', rows.slice(10, 20)))).toBe(true);
  });

  it('keeps no queue record alive through the pairs it caches', () => {
    const encoder = new IlpEncoder('cargo_data', 'site');
    const retained = retainedHeapBytes(() => {
      for (let s = 0; s < 20; s++) encoder.encodeRecords([{ payload: recordOf(`1\tvessel-with-a-long-name-${s}\tcargo\t1`, 1e6) }]);
    });
    // The encoder's own buffer grows to hold a batch's lines; what it must not keep is the records.
    expect(retained).toBeLessThan(8 * 1024 * 1024);
  });

  it('keeps every (ship_id, cargo_id) pair apart in its cache of line heads, past the cache bound', () => {
    const encoder = new IlpEncoder('t', SITE);
    // Pairs whose ids joined would read the same, and more pairs than the cache holds.
    const tricky = [
      { shipId: 'a\tb', cargoId: 'c' },
      { shipId: 'a', cargoId: 'b\tc' },
      { shipId: '1:a', cargoId: 'b' },
      { shipId: '1', cargoId: ':ab' },
    ];
    const many = Array.from({ length: 5000 }, (_, i) => ({ shipId: `ship-${i}`, cargoId: `c${i % 3}` }));
    const rows = [...tricky, ...many, ...tricky].map((pair, i) => ({ ...pair, timeNs: String(i), value: i }));
    expect(encoder.encode(rows).equals(clientEncode('t', rows))).toBe(true);
    const recordRows = [...many, ...many.slice(0, 10)].map((pair, i) => ({ ...pair, timeNs: String(i), value: i }));
    const records = queued([recordRows.slice(0, 2500), recordRows.slice(2500)]);
    expect(encoder.encodeRecords(records).equals(clientEncode('t', recordRows))).toBe(true);
  });

  it('keeps the same pair of two sites apart, past the bound of sites it caches', () => {
    const encoder = new IlpEncoder('t', SITE);
    const rows = Array.from({ length: 600 }, (_, i) => ({ shipId: 'pump-1', cargoId: 'pressure', timeNs: String(i), value: i }));
    const sites = rows.map((_, i) => `site-${i % 300}`);
    expect(
      encoder.encodeRecords(rows.map((r, i) => ({ ...queued([[r]])[0]!, site: sites[i]! }))).equals(clientEncode('t', rows, sites)),
    ).toBe(true);
  });
});
