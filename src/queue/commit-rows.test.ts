import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { queuedReading } from '../../test/support/queued-reading.js';
import { ReceiveClock } from '../reading/receive-clock.js';
import { JOIN_MAX_BYTES, type QueueRow, commitRows } from './commit-rows.js';
import { decodeRecord, encodeRecord } from './record-codec.js';

const request = fc.record({
  readings: fc.array(queuedReading(12), { minLength: 1, maxLength: 400 }),
  site: fc.constantFrom(null, 'north', 'south'),
  receivedMs: fc.integer({ min: 0, max: 2 ** 42 }),
});

const rowOf = (payload: string, readings: number, receivedMs: number, site: string | null): QueueRow => ({
  payload,
  readings,
  bytes: Buffer.byteLength(payload),
  receivedMs,
  site,
});

describe('the rows of a commit', () => {
  it('hold every reading of every request once, in order and by site, each row within the join limit unless one record is larger', () => {
    fc.assert(
      fc.property(fc.array(request, { maxLength: 30 }), (requests) => {
        const records = requests.map((r) => rowOf(encodeRecord(r.readings, new ReceiveClock()), r.readings.length, r.receivedMs, r.site));
        const rows = commitRows(records);
        expect(rows.flatMap((row) => decodeRecord(row.payload).map((line) => ({ line, site: row.site })))).toEqual(
          requests.flatMap((r) => r.readings.map((line) => ({ line, site: r.site }))),
        );
        for (const row of rows) {
          expect(row.bytes).toBe(Buffer.byteLength(row.payload));
          expect(row.readings).toBe(decodeRecord(row.payload).length);
          if (row.bytes > JOIN_MAX_BYTES) expect(records.some((r) => r.payload === row.payload)).toBe(true);
        }
        expect(rows.reduce((sum, row) => sum + row.readings, 0)).toBe(records.reduce((sum, r) => sum + r.readings, 0));
      }),
      { numRuns: propertyRuns(100) },
    );
  });

  it('joins single pushes of one site into one row with the newest receive time', () => {
    const rows = commitRows([rowOf('1\ta\tx\t1', 1, 30, null), rowOf('2\ta\tx\t2', 1, 10, null), rowOf('3\tb\tx\t3', 1, 20, null)]);
    expect(rows).toEqual([rowOf('1\ta\tx\t1\n2\ta\tx\t2\n3\tb\tx\t3', 3, 30, null)]);
  });

  it('keeps sites apart and a record without readings on its own row', () => {
    const rows = commitRows([
      rowOf('1\ta\tx\t1', 1, 1, 'north'),
      rowOf('2\ta\tx\t2', 1, 1, null),
      rowOf('', 0, 1, null),
      rowOf('3\ta\tx\t3', 1, 1, null),
    ]);
    expect(rows.map((row) => [row.site, row.payload])).toEqual([
      ['north', '1\ta\tx\t1'],
      [null, '2\ta\tx\t2'],
      [null, ''],
      [null, '3\ta\tx\t3'],
    ]);
  });

  it('leaves the records it was given as they were', () => {
    const records = [rowOf('1\ta\tx\t1', 1, 1, null), rowOf('2\ta\tx\t2', 1, 2, null)];
    const before = structuredClone(records);
    commitRows(records);
    expect(records).toEqual(before);
  });
});
