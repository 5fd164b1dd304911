import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queueRecord as record } from '../../../test/support/queue-record.js';
import { formatLine } from '../../queue/record-codec.js';
import { eachReading, readingJson } from '../outgoing-readings.js';
import { ReadingValues } from './reading-value.js';

/** Each reading of `records` as its message value writes it, beside readingJson's text of it. */
function bothWays(values: ReadingValues, records: Parameters<typeof eachReading>[0], site?: string): [string, string][] {
  return [...eachReading(records, [], site)].map((taken) => {
    const value = values.of(taken);
    const out = Buffer.alloc(value.bytes + 8, 0xee);
    const end = value.writeTo(out, 4);
    expect(end - 4).toBe(value.bytes);
    expect(out.subarray(end).every((b) => b === 0xee)).toBe(true);
    return [
      out.subarray(4, end).toString('latin1'),
      Buffer.from(readingJson(taken.reading, taken.siteJson, taken.valueText)).toString('latin1'),
    ];
  });
}

describe("a reading's Kafka message value written from its parts", () => {
  it('is byte for byte readingJson, for any ids, double, time and site, the caches warm or cold', () => {
    const values = new ReadingValues();
    const line = fc.record({
      timeNs: fc.bigInt({ min: 0n, max: 253_402_300_799_999_999_999n }).map(String),
      shipId: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).filter((s) => !/[\t\n\r]/.test(s)),
      cargoId: fc.constantFrom('temperature', 'humidité', 'co"2', 'a\\b'),
      value: fc.double({ noNaN: true, noDefaultInfinity: true }),
    });
    const site = fc.option(fc.string({ unit: 'grapheme', maxLength: 20 }), { nil: undefined });
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 5 }), site, site, (lines, ownSite, recordSite) => {
        const queued = { ...record(1, lines.map(formatLine).join('\n')), ...(recordSite === undefined ? {} : { site: recordSite }) };
        return bothWays(values, [queued], ownSite).every(([written, json]) => written === json);
      }),
      { numRuns: 500 },
    );
  });

  it('writes a value that is not a JSON number in the queue as readingJson formats it', () => {
    const lines = ['0x10', '1.', '.5', '+3', '1e5', '007', '-0'].map((text, i) => `${i + 1}\ts\tc\t${text}`).join('\n');
    for (const [written, json] of bothWays(new ReadingValues(), [record(1, lines)], 'pier 7')) expect(written).toBe(json);
  });

  it('starts its caches again past ten thousand ids, still writing them right', () => {
    const values = new ReadingValues();
    const lines = Array.from({ length: 10_050 }, (_, i) => `1\tship-${i}\tc\t${i}`).join('\n');
    const pairs = bothWays(values, [record(1, lines)], 'pier 7');
    expect(pairs).toHaveLength(10_050);
    for (const [written, json] of pairs) expect(written).toBe(json);
  });
});
