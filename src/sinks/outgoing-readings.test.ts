import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queueRecord as record } from '../../test/support/queue-record.js';
import type { DeadLetterInput } from '../queue/queue-reader.js';
import { formatLine } from '../queue/record-codec.js';
import { outgoingReadings, readingJson } from './outgoing-readings.js';

describe('readingJson', () => {
  it("writes the API's Reading with the stored time to the nanosecond", () => {
    const json = readingJson({ timeNs: '1764000000123456789', shipId: 'ship-1', cargoId: 'temp', value: 23.5 });
    expect(json).toBe('{"time":"2025-11-24T16:00:00.123456789Z","ship_id":"ship-1","cargo_id":"temp","value":23.5}');
    expect(JSON.parse(json)).toEqual({ time: '2025-11-24T16:00:00.123456789Z', ship_id: 'ship-1', cargo_id: 'temp', value: 23.5 });
  });

  it('keeps ids with quotes and non-ASCII intact, and the sign of -0', () => {
    const parsed = JSON.parse(readingJson({ timeNs: '0', shipId: 'schiff "Ä" \\ 1', cargoId: 'température', value: -0 }));
    expect(parsed).toEqual({ time: '1970-01-01T00:00:00.000000000Z', ship_id: 'schiff "Ä" \\ 1', cargo_id: 'température', value: -0 });
    expect(Object.is(parsed.value, -0)).toBe(true);
  });

  it('writes extreme doubles as JSON numbers that read back the same', () => {
    for (const value of [Number.MAX_VALUE, Number.MIN_VALUE, 1e21, -1.5e-300, 23.700000762939453]) {
      expect(JSON.parse(readingJson({ timeNs: '1', shipId: 's', cargoId: 'c', value })).value).toBe(value);
    }
  });
});

describe("a value sent as the queue's text", () => {
  it('is byte for byte what formatting the double gives, for any double the queue holds', () => {
    const reading = fc.record({
      shipId: fc.string({ minLength: 1 }),
      cargoId: fc.string({ minLength: 1 }),
      value: fc.double({ noNaN: true, noDefaultInfinity: true }),
    });
    fc.assert(
      fc.property(reading, (r) => {
        const [out] = outgoingReadings([record(1, formatLine({ timeNs: '1795852800123456789', ...r }))], [], 'pier 7');
        return out!.json === readingJson({ timeNs: '1795852800123456789', ...r }, '"pier 7"');
      }),
    );
  });

  it('is formatted anew when it is not a JSON number (a line the gateway did not write)', () => {
    for (const text of ['0x10', '1.', '.5', '+3', ' 7', '1e5', '007', '-0']) {
      const [out] = outgoingReadings([record(1, `1\ts\tc\t${text}`)], []);
      expect(JSON.parse(out!.json).value).toBe(Number(text));
      expect(Object.is(JSON.parse(out!.json).value, Number(text))).toBe(true);
    }
  });
});

describe('outgoingReadings', () => {
  it('keeps queue order and makes a corrupt record one dead letter', () => {
    const deadLetters: DeadLetterInput[] = [];
    const out = outgoingReadings([record(1, '1\ta\tx\t1\n2\ta\tx\t2'), record(2, 'garbage'), record(3, '3\tb\ty\t3')], deadLetters);
    expect(out.map((r) => r.reading.value)).toEqual([1, 2, 3]);
    expect(out.map((r) => r.record.id)).toEqual([1, 1, 3]);
    expect(deadLetters).toEqual([{ receivedMs: 1002, reason: expect.stringMatching(/^corrupt queue record/), line: 'garbage' }]);
  });
});
