import { statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { QueueRefusedError, RequestAbandonedError } from './queue-errors.js';
import { QueueReader } from './queue-reader.js';
import { countAdded, listSegments, segmentInsert } from './queue-file.js';
import { QueueWriter, type QueueOptions } from './queue-writer.js';
import { tempDir } from '../../test/support/temp-dir.js';
import { appendApart } from '../../test/support/queue-appends.js';

const open: QueueWriter[] = [];
const openQueue = (options: Partial<QueueOptions> = {}): QueueWriter => {
  const queue = QueueWriter.open({
    dataDir: tempDir('queue'),
    durability: 'process-crash',
    maxBytes: 1024 * 1024,
    ...options,
  });
  open.push(queue);
  return queue;
};
afterEach(() => {
  for (const queue of open.splice(0)) queue.close();
});

describe('QueueWriter and QueueReader', () => {
  it('commits appends made in the same turn of the event loop together (group commit)', async () => {
    const queue = openQueue();
    await Promise.all(Array.from({ length: 200 }, (_, i) => queue.append(`${i}\tship\tcargo\t${i}`, 1, 1000 + i)));
    // One commit, and one row for all 200: small records of one site share a row.
    expect(queue.stats()).toMatchObject({ commits: 1, records: 1, readings: 200 });
    await queue.append('1\ts\tc\t1', 1, 5000);
    expect(queue.stats().commits).toBe(2);
  });

  it('tells appendTo listeners in their order once committed, then its commit listener once a commit, in both modes', async () => {
    for (const durability of ['process-crash', 'power-loss'] as const) {
      const queue = openQueue({ durability, maxBytes: 100 });
      const told: string[] = [];
      queue.onCommitted(() => told.push(`commit ${queue.stats().commits}`));
      const listener = (name: string) => ({
        appended: (error: Error | undefined) =>
          told.push(error === undefined ? name : `${name} refused: ${(error as QueueRefusedError).refusal}`),
      });
      for (let i = 0; i < 3; i++) queue.appendTo(listener(`a${i}`), `${i}\ts\tc\t${i}`, 1, 1000 + i);
      // Past the bound: refused before appendTo returns, nothing waits for a commit.
      queue.appendTo(listener('big'), 'x'.repeat(200), 1, 2000);
      expect(told).toEqual(['big refused: full']);
      const done = queue.append('4\ts\tc\t4', 1, 1004);
      await done;
      expect(told).toEqual(['big refused: full', 'a0', 'a1', 'a2', 'commit 1']);
      expect(queue.stats()).toMatchObject({ commits: 1, readings: 4 });
      queue.close();
      queue.appendTo(listener('late'), '5\ts\tc\t5', 1, 1005);
      expect(told.at(-1)).toBe('late refused: closed');
    }
  });

  it('commits a side write in the transaction of its append, and alone through write(), in the same group commit', async () => {
    const queue = openQueue();
    queue.run('CREATE TABLE IF NOT EXISTS side_state (id INTEGER PRIMARY KEY)');
    const mark = (id: number) => ({ sql: 'INSERT OR REPLACE INTO side_state (id) VALUES (?)', params: [id] });
    await Promise.all([
      queue.append('1\ts\tc\t1', 1, 1000, undefined, undefined, mark(1)),
      queue.append('2\ts\tc\t2', 1, 1001),
      queue.write(mark(2)),
    ]);
    // One commit: the two records share a row, the side-only write adds none.
    expect(queue.stats()).toMatchObject({ commits: 1, records: 1, readings: 2 });
    const file = new Database(queue.path, { readonly: true });
    expect(file.prepare('SELECT id FROM side_state ORDER BY id').pluck().all()).toEqual([1, 2]);
    file.close();
    // A commit that is refused takes its side write with it.
    queue.close();
    await expect(queue.append('3\ts\tc\t3', 1, 1002, undefined, undefined, mark(3))).rejects.toBeInstanceOf(QueueRefusedError);
    await expect(queue.write(mark(4))).rejects.toBeInstanceOf(QueueRefusedError);
  });

  it("with a commit window, lets appends that come within it share the oldest one's commit, settling none before", async () => {
    const queue = openQueue({ commitWindowMs: 1500 });
    const started = performance.now();
    const settled: string[] = [];
    const first = queue.append('1\ts\tc\t1', 1, 1).then(() => settled.push('first'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = queue.append('2\ts\tc\t2', 1, 2).then(() => settled.push('second'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toEqual([]);
    await Promise.all([first, second]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1500);
    expect(queue.stats()).toMatchObject({ commits: 1, records: 1, readings: 2 });
    // The next append opens a window of its own.
    await queue.append('3\ts\tc\t3', 1, 3);
    expect(queue.stats().commits).toBe(2);
  });

  it('commits what waits in its commit window at once when it closes', async () => {
    const queue = openQueue({ commitWindowMs: 60_000 });
    const appended = queue.append('1\ts\tc\t1', 1, 1);
    expect(queue.close()).toBe(true);
    await appended;
    const reader = new Database(queue.path, { readonly: true });
    expect(reader.prepare('SELECT COUNT(*) AS n FROM segment_1').get()).toEqual({ n: 1 });
    reader.close();
  });

  it('settles an append only after its commit is on disk', async () => {
    const queue = openQueue();
    const appended = queue.append('1\ts\tc\t1', 1, 1);
    const reader = new Database(queue.path, { readonly: true });
    const count = () => (reader.prepare('SELECT COUNT(*) AS n FROM segment_1').get() as { n: number }).n;
    expect(count()).toBe(0);
    await appended;
    expect(count()).toBe(1);
    reader.close();
  });

  it('does not commit an append whose client closed its connection while it waited, and commits the rest', async () => {
    const queue = openQueue();
    const gone = { destroyed: false, readableEnded: false };
    const halfClosed = { destroyed: false, readableEnded: false };
    const abandoned = queue.append('1\ts\tc\t1', 1, 1, gone);
    const ended = queue.append('3\ts\tc\t3', 1, 1, halfClosed);
    const kept = queue.append('2\ts\tc\t2', 1, 1, { destroyed: false, readableEnded: false });
    // The end of the connection arrives in the next turn of the event loop, still before the commit.
    setImmediate(() => {
      gone.destroyed = true;
      halfClosed.readableEnded = true;
    });
    await expect(ended).rejects.toBeInstanceOf(RequestAbandonedError);
    await expect(abandoned).rejects.toBeInstanceOf(RequestAbandonedError);
    await kept;
    expect(queue.stats()).toMatchObject({ records: 1, readings: 1, commits: 1 });
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    expect(reader.readOldest(10, 1 << 20).map((r) => r.payload)).toEqual(['2\ts\tc\t2']);
    reader.close();
  });

  it('refuses appends beyond its bound without touching what is queued', async () => {
    const queue = openQueue({ maxBytes: 1024 * 1024 });
    const big = 'x'.repeat(400 * 1024);
    await queue.append(big, 1, 1);
    await queue.append(big, 1, 2);
    const refusal = await queue.append(big, 1, 3).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(QueueRefusedError);
    expect((refusal as QueueRefusedError).refusal).toBe('full');
    expect(queue.stats()).toMatchObject({ records: 2, bytes: 800 * 1024 });
    expect(queue.isFull()).toBe(true);
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    reader.complete(reader.readOldest(1, Number.MAX_SAFE_INTEGER));
    reader.close();
    queue.refresh();
    expect(queue.isFull()).toBe(false);
    await expect(queue.append(big, 1, 4)).resolves.toBeUndefined();
  });

  it('stays full, refusing every append, until the sinks made room below 95 % of its bound: no flip-flop with each small delivery', async () => {
    const queue = openQueue({ maxBytes: 1024 * 1024 });
    await queue.append('s'.repeat(10 * 1024), 1, 1);
    await queue.append('b'.repeat(1000 * 1024), 1, 2);
    await expect(queue.append('x'.repeat(20 * 1024), 1, 3)).rejects.toMatchObject({ refusal: 'full' });
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    reader.complete(reader.readOldest(1, Number.MAX_SAFE_INTEGER));
    queue.refresh();
    // 10 KiB of room would take a small request, but the queue is still 97.7 % full.
    expect(queue.isFull()).toBe(true);
    expect(queue.isWritable()).toBe(false);
    reader.complete(reader.readOldest(1, Number.MAX_SAFE_INTEGER));
    reader.close();
    queue.refresh();
    expect(queue.isFull()).toBe(false);
    await expect(queue.append('x'.repeat(20 * 1024), 1, 4)).resolves.toBeUndefined();
  });

  it('hands the reader the oldest records first, bounded by readings, and moves the mark past them on completion', async () => {
    const queue = openQueue();
    for (let i = 0; i < 5; i++) await queue.append(`${i}\ts\tc\t1\n${i}\ts\td\t2`, 2, 100 + i);
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    const batch = reader.readOldest(3, Number.MAX_SAFE_INTEGER);
    expect(batch.map((r) => r.receivedMs)).toEqual([100, 101]);
    expect(queue.oldestReceivedMs()).toBe(100);
    expect(reader.complete(batch, [{ receivedMs: 100, reason: 'refused', line: '0\ts\tc\t1' }])).toEqual({
      records: 2,
      readings: 4,
      deadLettered: 1,
    });
    reader.close();
    queue.refresh();
    expect(queue.stats()).toMatchObject({ records: 3, readings: 6 });
    expect(queue.oldestReceivedMs()).toBe(102);
    expect(queue.deadLetterCount()).toBe(1);
  });

  it('keeps its totals exact whoever changes the file, a reopen included', async () => {
    const queue = openQueue();
    await appendApart(queue, 0, 4500);
    // What the operator's CLI does: insert and record it in the ledger, in one transaction.
    const outsider = new Database(queue.path);
    outsider.transaction(() => {
      segmentInsert(outsider, listSegments(outsider).at(-1)!).run(1, 3, 10, '1\ts\tc\t1', null, null, null);
      countAdded(outsider, { records: 1, readings: 3, bytes: 10 });
    })();
    outsider.close();
    queue.refresh();
    expect(queue.stats()).toMatchObject({ records: 4501, readings: 4503 });
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    reader.complete(reader.readOldest(4200, Number.MAX_SAFE_INTEGER));
    reader.close();
    queue.refresh();
    expect(queue.stats()).toMatchObject({ records: 301, readings: 303 });
    queue.close();
    const reopened = openQueue({ dataDir: queue.dataDir });
    expect(reopened.stats()).toMatchObject({ records: 301, readings: 303 });
  });

  it('keeps its records and counters across a restart', async () => {
    const first = QueueWriter.open({ dataDir: tempDir('queue'), durability: 'power-loss', maxBytes: 1 << 20 });
    await first.append('1\ts\tc\t1\n2\ts\tc\t2', 2, 7);
    const pending = first.append('3\ts\tc\t3', 1, 8);
    first.close();
    await pending;
    const second = openQueue({ dataDir: join(first.path, '..') });
    expect(second.stats()).toMatchObject({ records: 2, readings: 3 });
    const reader = new QueueReader(second.dataDir, 'power-loss', 'questdb');
    expect(reader.readOldest(10, 1 << 20).map((r) => r.payload)).toEqual(['1\ts\tc\t1\n2\ts\tc\t2', '3\ts\tc\t3']);
    reader.close();
  });

  it('knows at open when its newest record was received, after every sink delivered it and a re-queued older one', async () => {
    const dataDir = tempDir('queue');
    expect(openQueue({ dataDir }).newestReceivedMs).toBeUndefined();
    open.pop()?.close();
    const first = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1 << 20 });
    await first.append('1\ts\tc\t1', 1, 5_000);
    await first.append('2\ts\tc\t2', 1, 9_000);
    first.close();
    const reader = new QueueReader(dataDir, 'process-crash', 'questdb');
    reader.complete(reader.readOldest(10, 1 << 20));
    reader.close();
    // What an operator re-queues keeps the time it was first received.
    const db = new Database(join(dataDir, 'queue.db'));
    segmentInsert(db, listSegments(db).at(-1)!).run(1_000, 1, 9, '3\ts\tc\t3', null, null, null);
    db.close();
    expect(openQueue({ dataDir }).newestReceivedMs).toBe(9_000);
  });

  it('starts new segments as they fill and drops the ones the flusher has finished', async () => {
    const queue = openQueue({ maxBytes: 64 * 1024 * 1024 });
    const segments = () => {
      const db = new Database(queue.path, { readonly: true });
      try {
        return listSegments(db);
      } finally {
        db.close();
      }
    };
    for (let round = 0; round < 3; round++) await appendApart(queue, round * 10_000, 10_000);
    expect(segments()).toEqual([1, 2]);
    const reader = new QueueReader(queue.dataDir, 'process-crash', 'questdb');
    // Segment 1 took the first two commits (20,000 records), segment 2 the third.
    const first = reader.readOldest(25_000, Number.MAX_SAFE_INTEGER);
    expect(first.map((r) => r.segment).filter((s, i, all) => all.indexOf(s) === i)).toEqual([1, 2]);
    reader.complete(first);
    expect(segments()).toEqual([2]);
    const rest = reader.readOldest(20_000, Number.MAX_SAFE_INTEGER);
    expect(rest.map((r) => r.payload.split('\t')[0])).toEqual(Array.from({ length: 5_000 }, (_, i) => String(25_000 + i)));
    reader.complete(rest);
    reader.close();
    queue.refresh();
    expect(queue.stats()).toMatchObject({ records: 0, readings: 0 });
    expect(queue.oldestReceivedMs()).toBeUndefined();
  });

  it('refuses appends once closed', async () => {
    const queue = openQueue();
    queue.close();
    await expect(queue.append('1\ts\tc\t1', 1, 1)).rejects.toMatchObject({ refusal: 'closed' });
  });

  it('once a checkpoint failed in another connection, reports it, refuses appends and closes without checkpointing, its log kept', async () => {
    const lost: Error[] = [];
    const queue = openQueue({ onSyncLost: (error) => lost.push(error) });
    await queue.append('1\ts\tc\t1', 1, 1);
    // What the delivery thread's failing checkpoint does (checkpoint.ts), then its message.
    Atomics.store(new Int32Array(queue.checkpointState), 0, 1);
    queue.checkpointFailedElsewhere('SQLITE_IOERR_FSYNC');
    expect(lost.map((error) => [error.name, (error.cause as Error).message])).toEqual([['QueueSyncLostError', 'SQLITE_IOERR_FSYNC']]);

    await expect(queue.append('2\ts\tc\t2', 1, 2)).rejects.toMatchObject({ refusal: 'io_error' });
    expect(queue.isWritable()).toBe(false);
    expect(queue.close()).toBe(false);
    // Left open, so nothing checkpointed: the reading is in the log alone.
    const reader = new Database(queue.path, { readonly: true });
    expect(reader.prepare('SELECT COUNT(*) AS n FROM segment_1').get()).toEqual({ n: 1 });
    reader.close();
    expect(statSync(`${queue.path}-wal`).size).toBeGreaterThan(0);
  });

  it('checkpoints its log itself once it holds a thousand pages, so the log starts over instead of growing', async () => {
    const queue = openQueue({ maxBytes: 64 * 1024 * 1024 });
    const batch = Array.from({ length: 100 }, (_, i) => `${i}\tship\tcargo\t${i}`).join('\n');
    // About 5,300 pages of commits, 5.5 MB of log if nothing were checkpointed.
    for (let i = 0; i < 1000; i++) await queue.append(batch, 100, i);
    expect(statSync(`${queue.path}-wal`).size).toBeLessThan(1.2 * 1024 * 1024);
  });
});
