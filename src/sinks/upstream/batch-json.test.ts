import { describe, expect, it } from 'vitest';
import { queueRecord as record } from '../../../test/support/queue-record.js';
import { outgoingReadings } from '../outgoing-readings.js';
import { batchBody, chunkReadings } from './batch-json.js';

describe('chunkReadings', () => {
  const readings = outgoingReadings([record(1, Array.from({ length: 10 }, (_, i) => `${i}\tship\tcargo\t${i}`).join('\n'))], []);

  it('cuts at the reading bound', () => {
    expect(chunkReadings(readings, 4, 1_000_000).map((c) => c.length)).toEqual([4, 4, 2]);
  });

  it('cuts at the byte bound, counting brackets and commas', () => {
    const one = readings[0]!.bytes;
    const chunks = chunkReadings(readings, 100, 2 + 3 * one + 2);
    expect(chunks.map((c) => c.length)).toEqual([3, 3, 3, 1]);
    for (const chunk of chunks) expect(Buffer.byteLength(batchBody(chunk))).toBeLessThanOrEqual(2 + 3 * one + 2);
  });

  it('sends a reading larger than the byte bound alone rather than never', () => {
    expect(chunkReadings(readings.slice(0, 2), 100, 10).map((c) => c.length)).toEqual([1, 1]);
  });

  it('makes a body that is the JSON array of the readings', () => {
    expect(JSON.parse(batchBody(readings.slice(0, 2)))).toHaveLength(2);
  });
});
