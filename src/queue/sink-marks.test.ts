import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { QueueReader } from './queue-reader.js';
import { QueueWriter } from './queue-writer.js';
import type { SinkRegistration } from './sink-marks.js';
import { appendApart } from '../../test/support/queue-appends.js';

// One progress mark per sink: the queue keeps what any sink still needs, and adding, removing or
// skipping a sink never moves another sink's mark.

const closing: { close(): unknown }[] = [];
const closeAll = (): void => {
  for (const item of closing.splice(0).reverse()) item.close();
};
afterEach(closeAll);

const LOCAL: SinkRegistration = { name: 'questdb', backfill: true };
const UPSTREAM: SinkRegistration = { name: 'upstream', backfill: false };

function openWriter(dataDir: string, sinks: SinkRegistration[]): QueueWriter {
  const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 64 * 1024 * 1024, sinks });
  closing.push(queue);
  return queue;
}

function reader(queue: QueueWriter, sink: string): QueueReader {
  const r = new QueueReader(queue.dataDir, 'process-crash', sink);
  closing.push(r);
  return r;
}

async function fill(queue: QueueWriter, from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i++) await queue.append(`${i}\tship\tcargo\t${i}`, 1, 1000 + i);
}

/** Delivers everything a sink has, in batches; returns the `value`s it saw. */
function drain(r: QueueReader): number[] {
  const seen: number[] = [];
  for (let batch = r.readOldest(7, 1 << 20); batch.length > 0; batch = r.readOldest(7, 1 << 20)) {
    for (const record of batch) seen.push(Number(record.payload.split('\t')[3]));
    r.complete(batch);
  }
  return seen;
}

describe('sink progress marks', () => {
  it('keeps readings until the slowest sink has them, and counts each sink its own backlog', async () => {
    const queue = openWriter(tempDir('marks'), [LOCAL, UPSTREAM]);
    await fill(queue, 0, 20);
    const local = reader(queue, 'questdb');
    const upstream = reader(queue, 'upstream');

    expect(drain(local)).toEqual([...Array(20).keys()]);
    queue.refresh();
    // The upstream sink still needs all 20: nothing left the queue.
    expect(queue.stats().readings).toBe(20);
    expect(queue.sinkBacklog('questdb', 20)?.readings).toBe(0);
    expect(queue.sinkBacklog('upstream', 0)).toEqual({ readings: 20, oldestReceivedMs: 1000 });

    expect(drain(upstream)).toEqual([...Array(20).keys()]);
    queue.refresh();
    expect(queue.stats().readings).toBe(0);
  });

  it('drops a segment only when every sink has passed it', async () => {
    const queue = openWriter(tempDir('marks'), [LOCAL, UPSTREAM]);
    // More records than a segment holds, appended in groups as concurrent requests are.
    for (let i = 0; i < 17_000; i += 1000) await appendApart(queue, i, 1000);
    // The writer has started segment 2: this one goes there.
    await queue.append('17000\ts\tc\t1', 1, 17_000);
    const segments = (): number => {
      const db = new Database(queue.path, { readonly: true });
      try {
        return db.prepare("SELECT COUNT(*) FROM sqlite_schema WHERE name GLOB 'segment_*'").pluck().get() as number;
      } finally {
        db.close();
      }
    };
    expect(segments()).toBe(2);
    const local = reader(queue, 'questdb');
    local.complete(local.readOldest(20_000, 1 << 30));
    expect(segments()).toBe(2);
    const upstream = reader(queue, 'upstream');
    upstream.complete(upstream.readOldest(20_000, 1 << 30));
    expect(segments()).toBe(1);
  });

  it('starts a sink added later at the newest reading, or at the oldest queued one when it backfills', async () => {
    const dataDir = tempDir('marks');
    const first = openWriter(dataDir, [LOCAL]);
    await fill(first, 0, 10);
    const local = reader(first, 'questdb');
    local.complete(local.readOldest(4, 1 << 20));
    closeAll();

    const second = openWriter(dataDir, [LOCAL, UPSTREAM, { name: 'kafka', backfill: true }]);
    expect(second.registered.added.map((a) => a.name)).toEqual(['upstream', 'kafka']);
    await fill(second, 10, 2);
    expect(drain(reader(second, 'upstream'))).toEqual([10, 11]);
    // Backfill: what is still queued (the local sink had delivered 0-3), not what is gone.
    expect(drain(reader(second, 'kafka'))).toEqual([4, 5, 6, 7, 8, 9, 10, 11]);
    // The local sink carries on where it was: nothing it delivered comes again.
    expect(drain(reader(second, 'questdb'))).toEqual([4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('lets go of what only a removed sink needed, without moving the others', async () => {
    const dataDir = tempDir('marks');
    const first = openWriter(dataDir, [LOCAL, UPSTREAM]);
    await fill(first, 0, 10);
    drain(reader(first, 'questdb'));
    const upstream = reader(first, 'upstream');
    upstream.complete(upstream.readOldest(3, 1 << 20));
    await fill(first, 10, 2);
    closeAll();

    const second = openWriter(dataDir, [LOCAL]);
    expect(second.registered.removed).toEqual(['upstream']);
    expect(second.registered.released.readings).toBe(7);
    expect(second.stats().readings).toBe(2);
    expect(drain(reader(second, 'questdb'))).toEqual([10, 11]);
  });

  it("skips a dropping sink's oldest readings, never past the limit, and a batch in flight does not move its mark back", async () => {
    const queue = openWriter(tempDir('marks'), [LOCAL, UPSTREAM]);
    await fill(queue, 0, 10);
    const local = reader(queue, 'questdb');
    local.complete(local.readOldest(6, 1 << 20));
    const upstream = reader(queue, 'upstream');
    const inFlight = upstream.readOldest(2, 1 << 20);

    // Wants far more than there is, but the local sink (which keeps everything) stands at 6.
    const skipped = upstream.skipOldest(1 << 20, local.progress);
    expect(skipped).toMatchObject({ records: 6, readings: 6 });
    queue.refresh();
    expect(queue.stats().readings).toBe(4);
    upstream.complete(inFlight);
    expect(upstream.progress).toEqual(local.progress);
    expect(drain(upstream)).toEqual([6, 7, 8, 9]);
  });
});
