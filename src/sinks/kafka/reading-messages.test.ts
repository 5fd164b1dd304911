import fc from 'fast-check';
import { murmur2 } from '../../../test/support/kafka-client.js';
import { describe, expect, it } from 'vitest';
import { propertyRuns } from '../../../test/support/property-sizes.js';
import { queueRecord as record } from '../../../test/support/queue-record.js';
import { recordOf, retainedHeapBytes } from '../../../test/support/retained-heap.js';
import type { DeadLetterInput, QueueRecord } from '../../queue/queue-reader.js';
import { formatLine } from '../../queue/record-codec.js';
import { eachReading, readingJson } from '../outgoing-readings.js';
import { ReadingMessages } from './reading-messages.js';

/** Each reading of `records` as its message writes it (key, value, hash), beside what the client and readingJson make of it. */
function bothWays(messages: ReadingMessages, records: readonly QueueRecord[], site?: string, instance?: string) {
  messages.load(records, [], site, instance);
  const taken = [...eachReading(records, [], site, instance)];
  expect(messages.length).toBe(taken.length);
  return taken.map((t, i) => {
    const out = Buffer.alloc(messages.bytes(i) + 8, 0xee);
    const keyEnd = messages.writeKey(i, out, 4);
    expect(keyEnd - 4).toBe(messages.keyBytes(i));
    const end = messages.writeValue(i, out, keyEnd);
    expect(end - keyEnd).toBe(messages.valueBytes(i));
    expect(out.subarray(end).every((b) => b === 0xee)).toBe(true);
    const key = Buffer.from(t.reading.shipId);
    return {
      written: [out.subarray(4, keyEnd).toString('hex'), out.subarray(keyEnd, end).toString('latin1'), messages.hash(i)],
      expected: [key.toString('hex'), Buffer.from(readingJson(t.reading, t.siteJson, t.valueText)).toString('latin1'), murmur2(key) >>> 0],
      reading: [messages.record(i), messages.reading(i)],
      taken: [t.record, t.reading],
    };
  });
}

describe("a batch's Kafka messages written from its queue records", () => {
  it('are byte for byte readingJson, keyed and hashed as the client does, for any ids, double, time and site, the caches warm or cold', () => {
    const messages = new ReadingMessages();
    const id = fc.oneof(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }),
      fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 12 }),
    );
    const line = fc.record({
      timeNs: fc.oneof(fc.bigInt({ min: 0n, max: 9_999_999_999_999_999_999n }), fc.bigInt({ min: 0n, max: 99_999_999_999n })).map(String),
      shipId: id.filter((s) => !/[\t\n\r]/.test(s)),
      cargoId: fc.oneof(
        fc.constantFrom('temperature', 'humidité', 'co"2', 'a\\b'),
        id.filter((s) => !/[\t\n\r]/.test(s)),
      ),
      value: fc.double({ noNaN: true, noDefaultInfinity: true }),
    });
    const site = fc.option(fc.string({ unit: 'grapheme', maxLength: 20 }), { nil: undefined });
    fc.assert(
      fc.property(
        fc.array(fc.array(line, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 3 }),
        site,
        site,
        fc.option(fc.constantFrom('k3xq7aenm2pz4d5w', 'a-b'), { nil: undefined }),
        fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
        (lines, ownSite, recordSite, instance, answeredHere) => {
          // A site on a record is another site's, or this gateway's own name it was answered under.
          const records = lines.map((l, r) => ({
            ...record(r + 1, l.map(formatLine).join('\n')),
            ...(recordSite === undefined ? {} : { site: recordSite }),
            ...(recordSite !== undefined && answeredHere[r] ? { ownSite: 1 } : {}),
          }));
          for (const m of bothWays(messages, records, ownSite, instance)) {
            expect(m.written).toEqual(m.expected);
            expect(m.reading).toEqual(m.taken);
          }
        },
      ),
      { numRuns: propertyRuns(500) },
    );
  });

  it("name this gateway's instance beside the site of its own readings, not of the readings it relays", () => {
    const own = { ...record(1, '1\tpump-1\tpressure\t4'), site: 'old name', ownSite: 3 };
    const legacy = record(2, '2\tpump-1\tpressure\t5');
    const relayed = { ...record(3, '3\tpump-1\tpressure\t6'), site: 'pier 8' };
    const values = bothWays(new ReadingMessages(), [own, legacy, relayed], 'new name', 'k3xq7aenm2pz4d5w').map((m) => {
      expect(m.written).toEqual(m.expected);
      return JSON.parse(m.written[1] as string) as { site: string; instance?: string };
    });
    expect(values.map((v) => [v.site, v.instance])).toEqual([
      ['old name', 'k3xq7aenm2pz4d5w'],
      ['new name', 'k3xq7aenm2pz4d5w'],
      ['pier 8', undefined],
    ]);
  });

  it('writes a value that is not a JSON number in the queue as readingJson formats it, and a short time padded', () => {
    const lines = ['0x10', '1.', '.5', '+3', '1e5', '007', '-0', '1E-7', '-0.5e+3', '12.50']
      .map((text, i) => `${i + 1}${'0'.repeat(i)}\ts\tc\t${text}`)
      .join('\n');
    for (const m of bothWays(new ReadingMessages(), [record(1, lines)], 'pier 7')) expect(m.written).toEqual(m.expected);
  });

  it('starts its caches again past ten thousand ids, still writing them right', () => {
    const lines = Array.from({ length: 10_050 }, (_, i) => `1\tship-${i}-ø\tc\t${i}`).join('\n');
    const pairs = bothWays(new ReadingMessages(), [record(1, lines)], 'pier 7');
    expect(pairs).toHaveLength(10_050);
    for (const m of pairs) expect(m.written).toEqual(m.expected);
  });

  it('keeps a corrupt record as one dead letter, none of its readings taken, and the records around it whole', () => {
    const messages = new ReadingMessages();
    const deadLetters: DeadLetterInput[] = [];
    const records = [record(1, '1\ta\tc\t1\n2\tb\tc\t2'), record(2, '3\tok\tc\t3\nnot a line'), record(3, '4\td\tc\t4')];
    messages.load(records, deadLetters);
    expect(messages.length).toBe(3);
    expect([0, 1, 2].map((i) => messages.reading(i).shipId)).toEqual(['a', 'b', 'd']);
    expect(messages.record(2)).toBe(records[2]);
    expect(deadLetters).toHaveLength(1);
    expect(deadLetters[0]!.line).toBe(records[1]!.payload);
  });

  it("finds the records corrupt that the queue codec's scanRecord does, with its reason, and takes the others' readings", () => {
    const field = (...choices: string[]) => fc.constantFrom(...choices);
    const line = fc.oneof(
      fc
        .tuple(
          field('1', '1795780800123456789', '', 'x1', '12345678901234567890', '007'),
          field('ship', '', 'MV Ærø', 'a"b'),
          field('temp', '', 'c\\d'),
          field('1', '-0.5', '', 'NaN', 'Infinity', '1e999', ' 5', '0x10', '-', '1.', 'abc', '1e-7', '9'.repeat(400)),
        )
        .map((fields) => fields.join('\t')),
      field('', '1\ta\tb', '1\ta\tb\t2\t3', '\t\t\t'),
    );
    fc.assert(
      fc.property(fc.array(fc.array(line, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 4 }), (lines) => {
        const records = lines.map((l, r) => record(r + 1, l.join('\n')));
        const messages = new ReadingMessages();
        const ours: DeadLetterInput[] = [];
        const codec: DeadLetterInput[] = [];
        messages.load(records, ours, 'pier 7');
        const taken = [...eachReading(records, codec, 'pier 7')];
        expect(ours).toEqual(codec);
        expect(Array.from({ length: messages.length }, (_, i) => messages.reading(i))).toEqual(taken.map((t) => t.reading));
        for (const [i, t] of taken.entries()) {
          const out = Buffer.alloc(messages.valueBytes(i));
          messages.writeValue(i, out, 0);
          expect(out.toString()).toBe(readingJson(t.reading, t.siteJson, t.valueText));
        }
      }),
      { numRuns: propertyRuns(300) },
    );
  });

  it('keeps no queue record alive once released, nor through an id it keeps', () => {
    const messages = new ReadingMessages();
    const retained = retainedHeapBytes(() => {
      for (let s = 0; s < 20; s++) {
        messages.load([record(s, recordOf(`1\tvessel-with-a-long-name-ø-${s}\tc\t1`, 1e6))], []);
        messages.release();
      }
    });
    expect(retained).toBeLessThan(4 * 1024 * 1024);
  });
});
