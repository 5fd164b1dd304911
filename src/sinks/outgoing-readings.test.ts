import { describe, expect, it } from 'vitest';
import { queueRecord as record } from '../../test/support/queue-record.js';
import type { DeadLetterInput } from '../queue/queue-reader.js';
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

describe('outgoingReadings', () => {
  it('keeps queue order and makes a corrupt record one dead letter', () => {
    const deadLetters: DeadLetterInput[] = [];
    const out = outgoingReadings([record(1, '1\ta\tx\t1\n2\ta\tx\t2'), record(2, 'garbage'), record(3, '3\tb\ty\t3')], deadLetters);
    expect(out.map((r) => r.reading.value)).toEqual([1, 2, 3]);
    expect(out.map((r) => r.record.id)).toEqual([1, 1, 3]);
    expect(deadLetters).toEqual([{ receivedMs: 1002, reason: expect.stringMatching(/^corrupt queue record/), line: 'garbage' }]);
  });
});
