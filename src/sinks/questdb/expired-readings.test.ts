import { describe, expect, it } from 'vitest';
import { queueRecord } from '../../../test/support/queue-record.js';
import { withoutExpired } from './expired-readings.js';

const record = (id: number, times: string[]) => queueRecord(id, times.map((t, i) => `${t}\ts\tc${i}\t${i}`).join('\n'), 0);

describe('withoutExpired', () => {
  it('leaves out exactly the readings before the threshold, keeping the rest of each record in order', () => {
    const threshold = '1700000000000000000';
    const records = [
      record(1, ['1700000000000000000', '1800000000000000000']),
      record(2, ['1699999999999999999', '1700000000000000001', '5', '1600000000000000000', '1750000000000000000']),
      record(3, ['0', '999999999']),
    ];
    const result = withoutExpired(records, threshold);
    expect(result.expired).toBe(5);
    expect(result.records).toHaveLength(2);
    expect(result.records[0]).toBe(records[0]);
    expect(result.records[1]).toMatchObject({
      id: 2,
      readings: 2,
      payload: '1700000000000000001\ts\tc1\t1\n1750000000000000000\ts\tc4\t4',
    });
  });

  it('keeps a line that is not a record line, for the decoder to set aside', () => {
    const broken = { segment: 1, id: 9, receivedMs: 0, readings: 2, bytes: 0, payload: 'garbage\n5\ts\tc\t1' };
    const result = withoutExpired([broken], '10');
    expect(result).toEqual({ records: [{ ...broken, payload: 'garbage', readings: 1 }], expired: 1 });
  });
});
