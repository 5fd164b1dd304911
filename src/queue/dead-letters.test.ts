import { describe, expect, it } from 'vitest';
import { DeadLetterStore, IngestDeadLetters } from './dead-letters.js';
import { QueueReader } from './queue-reader.js';
import { QueueWriter } from './queue-writer.js';
import { tempDir } from '../../test/support/temp-dir.js';

describe('re-queued dead letters', () => {
  it('go to every sink when they were refused at ingest, as no sink ever had them', async () => {
    const dataDir = tempDir('dead-letters');
    const queue = QueueWriter.open({
      dataDir,
      durability: 'process-crash',
      maxBytes: 1 << 20,
      sinks: [
        { name: 'questdb', backfill: true },
        { name: 'upstream', backfill: true },
      ],
    });
    const ingest = new IngestDeadLetters(dataDir, 'process-crash');
    await ingest.add({ receivedMs: 1_000, source: 'mqtt', reason: 'foreign ship', line: '1\tstray\tc\t1' });
    ingest.close();
    queue.close();

    const store = new DeadLetterStore(dataDir);
    try {
      expect(store.requeue({ ids: 'all' })).toEqual(new Map([['mqtt', 1]]));
    } finally {
      store.close();
    }
    for (const sink of ['questdb', 'upstream']) {
      const reader = new QueueReader(dataDir, 'process-crash', sink);
      expect(reader.readOldest(10, 1 << 20)).toEqual([expect.objectContaining({ payload: '1\tstray\tc\t1', receivedMs: 1_000 })]);
      expect(reader.readOldest(10, 1 << 20)[0]!.sink).toBeUndefined();
      reader.close();
    }
  });
});
