import { describe, expect, it } from 'vitest';
import type { QueueRecord } from '../../queue/queue-reader.js';
import { SinkThinning } from './sink-thinning.js';

const rules = [{ match: 'temp', deadband: 1 }];
const record = (id: number, value: number): QueueRecord => {
  const payload = `${id}000000\ts\ttemp\t${value}`;
  return { segment: 1, id, receivedMs: id, readings: 1, bytes: payload.length, payload };
};
const lines = (records: readonly QueueRecord[]): string[] => records.map((r) => r.payload);

describe('a sink with a replay window', () => {
  it('sends again from its kept mark what it sent the first time, the state on disk being the state at that mark', () => {
    const thinning = new SinkThinning({ sink: 'remote-questdb', rules, stored: new Map(), keeps: true });
    const first = [record(1, 10), record(2, 10.5)];
    const second = [record(3, 11.5), record(4, 11.8), record(5, 13)];
    expect(lines(thinning.thin(first).records)).toEqual(['1000000\ts\ttemp\t10']);
    expect(thinning.changes()).toBeUndefined();
    thinning.delivered({ segment: 1, lastId: 2 });
    const sentSecond = lines(thinning.thin(second).records);
    expect(sentSecond).toEqual(['3000000\ts\ttemp\t11.5', '5000000\ts\ttemp\t13']);
    thinning.delivered({ segment: 1, lastId: 5 });

    // The kept mark passes the first batch: its state is what a replay starts from.
    const written = thinning.keptChanges({ segment: 1, lastId: 2 });
    expect([...written!.keys()]).toEqual(['o\ts\ttemp']);
    thinning.kept({ segment: 1, lastId: 2 });
    thinning.replaying();
    expect(lines(thinning.thin(second).records)).toEqual(sentSecond);

    // And after a start from what the file holds.
    const restarted = new SinkThinning({
      sink: 'remote-questdb',
      rules,
      stored: new Map([['o\ts\ttemp', written!.get('o\ts\ttemp')!]]),
      keeps: true,
    });
    expect(lines(restarted.thin(second).records)).toEqual(sentSecond);
  });

  it('thins a batch that failed the same way when it is sent again', () => {
    const thinning = new SinkThinning({ sink: 'upstream', rules, stored: new Map(), keeps: false });
    const batch = [record(1, 10), record(2, 12)];
    const sent = lines(thinning.thin(batch).records);
    thinning.failed();
    expect(lines(thinning.thin(batch).records)).toEqual(sent);
    expect([...thinning.changes()!.keys()]).toEqual(['o\ts\ttemp']);
  });
});
