import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { QueueReader } from './queue-reader.js';
import { QueueWriter } from './queue-writer.js';
import { appendApart } from '../../test/support/queue-appends.js';

// A sink's kept mark: the records between it and the progress mark were delivered but stay in the
// file, across a restart, and a replay reads them again without counting them twice.

const closing: { close(): unknown }[] = [];
afterEach(() => {
  for (const item of closing.splice(0).reverse()) item.close();
});

function open(dataDir: string): QueueWriter {
  const queue = QueueWriter.open({
    dataDir,
    durability: 'process-crash',
    maxBytes: 64 * 1024 * 1024,
    sinks: [{ name: 'questdb', backfill: true }],
  });
  closing.push(queue);
  return queue;
}

function keepingReader(queue: QueueWriter): QueueReader {
  const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb', { keeps: true });
  closing.push(reader);
  return reader;
}

const values = (records: { payload: string }[]): number[] => records.map((r) => Number(r.payload.split('\t')[3]));

async function fill(queue: QueueWriter, from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i++) await queue.append(`${i}\tship\tcargo\t${i}`, 1, 1000 + i);
}

function segments(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT COUNT(*) FROM sqlite_schema WHERE name GLOB 'segment_*'").pluck().get() as number;
  } finally {
    db.close();
  }
}

describe('kept mark', () => {
  it('sends the kept records again after a restart, and they are not queued readings', async () => {
    const dataDir = tempDir('kept');
    const queue = open(dataDir);
    await fill(queue, 0, 10);
    const first = keepingReader(queue);
    first.complete(first.readOldest(6, 1 << 20));
    first.keep({ segment: 1, lastId: 2 });
    queue.refresh();
    expect(queue.stats().readings).toBe(4);
    first.close();
    closing.splice(closing.indexOf(first), 1);

    const again = keepingReader(queue);
    expect(again.replay()).toBe(4);
    const replayed = again.readOldest(100, 1 << 20);
    expect(values(replayed)).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
    // The replayed part was counted when it was first delivered.
    expect(again.complete(replayed.slice(0, 4))).toMatchObject({ records: 4, readings: 0 });
    expect(again.complete(replayed.slice(4))).toMatchObject({ records: 4, readings: 4 });
    queue.refresh();
    expect(queue.stats().readings).toBe(0);
    expect(again.readOldest(100, 1 << 20)).toEqual([]);
  });

  it('never lets go past the progress mark, and keeps segments until the kept mark passed them', async () => {
    const dataDir = tempDir('kept');
    const queue = open(dataDir);
    for (let i = 0; i < 17_000; i += 1000) await appendApart(queue, i, 1000);
    await queue.append('17000\ts\tc\t1', 1, 17_000);
    const reader = keepingReader(queue);
    reader.complete(reader.readOldest(20_000, 1 << 30));
    expect(segments(queue.path)).toBe(2);

    reader.keep({ segment: 99, lastId: 0 });

    expect(reader.kept).toEqual(reader.progress);
    expect(segments(queue.path)).toBe(1);
    expect(reader.replay()).toBe(0);
  });

  it('keeps nothing for a sink without a window', async () => {
    const queue = open(tempDir('kept'));
    await fill(queue, 0, 3);
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    closing.push(reader);
    reader.complete(reader.readOldest(100, 1 << 20));
    expect(reader.kept).toBeUndefined();
    expect(reader.replay()).toBe(0);
    expect(reader.readOldest(100, 1 << 20)).toEqual([]);
  });
});
