import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { DeadLetterStore } from './dead-letters.js';
import { listSegments, queuePath } from './queue-file.js';
import { QueueReader, isOwnRecord, type QueueRecord } from './queue-reader.js';
import { QueueWriter } from './queue-writer.js';

const opened: { close(): unknown }[] = [];
afterEach(() => {
  for (const handle of opened.splice(0).reverse()) handle.close();
});

function openQueue(dataDir: string, site?: string): QueueWriter {
  const queue = QueueWriter.open({
    dataDir,
    durability: 'process-crash',
    maxBytes: 1 << 20,
    sinks: [{ name: 'questdb', backfill: true }],
    ...(site === undefined ? {} : { site }),
  });
  opened.push(queue);
  return queue;
}

function reader(dataDir: string, keeps = false): QueueReader {
  const queueReader = new QueueReader(dataDir, 'process-crash', 'questdb', { keeps });
  opened.push(queueReader);
  return queueReader;
}

/** Where each record's readings come from, as a sink sees it. */
const origins = (records: readonly QueueRecord[]) => records.map((r) => ({ payload: r.payload, site: r.site, own: isOwnRecord(r) }));

describe("a site's own readings", () => {
  it('keep the name they were answered under across a rename, also when sent again from the replay window', async () => {
    const dataDir = tempDir('own-site');
    const before = openQueue(dataDir, 'old-name');
    await before.append('1\ts\tc\t1', 1, 1);
    // A header naming the gateway's own site is its own site.
    await before.append('2\ts\tc\t2', 1, 2, undefined, 'old-name');
    await before.append('3\ts\tc\t3', 1, 3, undefined, 'pier-x');
    const sink = reader(dataDir, true);
    sink.complete(sink.readOldest(10, 1 << 20));
    sink.close();
    opened.pop();
    before.close();

    const after = openQueue(dataDir, 'new-name');
    await after.append('4\ts\tc\t4', 1, 4);
    const replayed = reader(dataDir, true);
    expect(replayed.replay()).toBe(3);
    expect(origins(replayed.readOldest(10, 1 << 20))).toEqual([
      { payload: '1\ts\tc\t1', site: 'old-name', own: true },
      { payload: '2\ts\tc\t2', site: 'old-name', own: true },
      { payload: '3\ts\tc\t3', site: 'pier-x', own: false },
      { payload: '4\ts\tc\t4', site: 'new-name', own: true },
    ]);
  });

  it('keep their name as dead letters and when re-queued', async () => {
    const dataDir = tempDir('own-site');
    const before = openQueue(dataDir, 'old-name');
    await before.append('1\ts\tc\t1', 1, 1);
    await before.append('2\ts\tc\t2', 1, 2, undefined, 'pier-x');
    const sink = reader(dataDir);
    const [own, relayed] = sink.readOldest(10, 1 << 20);
    sink.complete(
      [own!, relayed!],
      [
        { receivedMs: 1, reason: 'refused', line: own!.payload, ownSite: own!.ownSite! },
        { receivedMs: 2, reason: 'refused', line: relayed!.payload, site: relayed!.site! },
      ],
    );
    sink.close();
    opened.pop();
    before.close();
    opened.pop();

    const after = openQueue(dataDir, 'new-name');
    const store = new DeadLetterStore(dataDir);
    opened.push(store);
    expect(store.list(10).map((l) => ({ site: l.site, line: l.line }))).toEqual([
      { site: 'old-name', line: '1\ts\tc\t1' },
      { site: 'pier-x', line: '2\ts\tc\t2' },
    ]);
    store.requeue({ ids: 'all' });
    after.refresh();
    expect(origins(reader(dataDir).readOldest(10, 1 << 20))).toEqual([
      { payload: '1\ts\tc\t1', site: 'old-name', own: true },
      { payload: '2\ts\tc\t2', site: 'pier-x', own: false },
    ]);
  });

  it('cost an id per row, not the name, and join one row when answered together', async () => {
    const dataDir = tempDir('own-site');
    const queue = openQueue(dataDir, 'a site name of some length');
    await Promise.all([queue.append('1\ts\tc\t1', 1, 1), queue.append('2\ts\tc\t2', 1, 2)]);
    const db = new Database(queuePath(dataDir), { readonly: true });
    opened.push(db);
    const segment = listSegments(db).at(-1)!;
    expect(db.prepare(`SELECT site, typeof(own_site) AS ownSite, readings FROM segment_${segment}`).all()).toEqual([
      { site: null, ownSite: 'integer', readings: 2 },
    ]);
  });

  it('queued by a build that keeps no name (a file it wrote into, or one from before) are the site as named now', async () => {
    const dataDir = tempDir('own-site');
    openQueue(dataDir, 'old-name').close();
    opened.pop();
    // As a build without the column leaves the file: a segment made without it, a record inserted naming its columns.
    const older = new Database(queuePath(dataDir));
    const segment = listSegments(older).at(-1)! + 1;
    older.exec(`CREATE TABLE segment_${segment} (id INTEGER PRIMARY KEY, received_ms INTEGER NOT NULL, readings INTEGER NOT NULL,
      bytes INTEGER NOT NULL, payload TEXT NOT NULL, site TEXT, sink TEXT)`);
    older
      .prepare(
        `INSERT INTO segment_${segment} (received_ms, readings, bytes, payload, site, sink) VALUES (1, 1, 8, '1\ts\tc\t1', NULL, NULL)`,
      )
      .run();
    older.close();

    const queue = openQueue(dataDir, 'new-name');
    await queue.append('2\ts\tc\t2', 1, 2);
    expect(origins(reader(dataDir).readOldest(10, 1 << 20))).toEqual([
      { payload: '1\ts\tc\t1', site: undefined, own: true },
      { payload: '2\ts\tc\t2', site: 'new-name', own: true },
    ]);
  });

  it('without a site given to the queue are queued without a name', async () => {
    const dataDir = tempDir('own-site');
    const queue = openQueue(dataDir);
    await queue.append('1\ts\tc\t1', 1, 1);
    expect(origins(reader(dataDir).readOldest(10, 1 << 20))).toEqual([{ payload: '1\ts\tc\t1', site: undefined, own: true }]);
  });
});
