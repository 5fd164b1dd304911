import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { DeadLetterStore } from './dead-letters.js';
import { queuePath } from './queue-file.js';
import { QUEUE_FORMAT, QueueFormatError, readQueueFormat } from './queue-format.js';
import { QueueReader } from './queue-reader.js';
import { QueueWriter } from './queue-writer.js';
import { tempDir } from '../../test/support/temp-dir.js';

const openQueue = (dataDir: string): QueueWriter => QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1 << 20 });

/** A queue file as release 0.1.0 left it: format 1, one record queued. */
function writeFormat1File(dataDir: string): void {
  const db = new Database(queuePath(dataDir));
  db.pragma('page_size = 1024');
  db.pragma('journal_mode = WAL');
  db.pragma('auto_vacuum = INCREMENTAL');
  db.exec(`
    CREATE TABLE dead_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, received_ms INTEGER NOT NULL, failed_ms INTEGER NOT NULL, reason TEXT NOT NULL, line TEXT NOT NULL);
    CREATE TABLE ledger (id INTEGER PRIMARY KEY CHECK (id = 1), added_records INTEGER NOT NULL DEFAULT 0, added_readings INTEGER NOT NULL DEFAULT 0,
      added_bytes INTEGER NOT NULL DEFAULT 0, removed_records INTEGER NOT NULL DEFAULT 0, removed_readings INTEGER NOT NULL DEFAULT 0, removed_bytes INTEGER NOT NULL DEFAULT 0);
    INSERT INTO ledger (id) VALUES (1);
    CREATE TABLE progress (id INTEGER PRIMARY KEY CHECK (id = 1), segment INTEGER NOT NULL, last_id INTEGER NOT NULL);
    INSERT INTO progress VALUES (1, 1, 0);
    CREATE TABLE segment_1 (id INTEGER PRIMARY KEY, received_ms INTEGER NOT NULL, readings INTEGER NOT NULL, bytes INTEGER NOT NULL, payload TEXT NOT NULL);
    INSERT INTO segment_1 (received_ms, readings, bytes, payload) VALUES (1000, 2, 11, 'two\treadings');
  `);
  db.pragma('user_version = 1');
  db.close();
}

/** A queue file from a release with a format this one does not know. */
function writeNewerFile(dataDir: string): Database.Database {
  const db = new Database(queuePath(dataDir));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE format_history (version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL, gateway_version TEXT NOT NULL)');
  db.prepare('INSERT INTO format_history VALUES (?, 0, ?)').run(QUEUE_FORMAT + 1, '9.9.9');
  db.exec('CREATE TABLE queued_in_some_new_way (payload TEXT)');
  db.pragma(`user_version = ${QUEUE_FORMAT + 1}`);
  return db;
}

/** Each file's SHA-256, by name. */
const snapshot = (dataDir: string): Record<string, string> =>
  Object.fromEntries(
    readdirSync(dataDir).map((name) => [
      name,
      createHash('sha256')
        .update(readFileSync(join(dataDir, name)))
        .digest('hex'),
    ]),
  );

describe('queue file format', () => {
  it('creates a new file at the current format and records the release that made it', () => {
    const dataDir = tempDir('format');
    openQueue(dataDir).close();
    expect(readQueueFormat(queuePath(dataDir)).version).toBe(QUEUE_FORMAT);
    const db = new Database(queuePath(dataDir), { readonly: true });
    expect(db.prepare('SELECT version, gateway_version AS release FROM format_history').all()).toEqual([
      { version: 2, release: '0.0.0-dev' },
      { version: 3, release: '0.0.0-dev' },
      { version: 4, release: '0.0.0-dev' },
      { version: 5, release: '0.0.0-dev' },
    ]);
    db.close();
  });

  it('upgrades a format 1 file in place with its backlog intact', async () => {
    const dataDir = tempDir('format');
    writeFormat1File(dataDir);
    const queue = openQueue(dataDir);
    expect(queue.stats()).toMatchObject({ records: 1, readings: 2, bytes: 11 });
    await queue.append('one\treading', 1, 2000);
    expect(queue.stats()).toMatchObject({ records: 2, readings: 3 });
    queue.close();
    expect(readQueueFormat(queuePath(dataDir)).version).toBe(QUEUE_FORMAT);
  });

  it("upgrades 0.4.0's queue (format 4) in place: its records and dead letters are the gateway's own site's, for every sink; kept readings are let go", () => {
    const dataDir = tempDir('format');
    copyFileSync(join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'queue-v0.4.0.db'), queuePath(dataDir));
    const old = new Database(queuePath(dataDir));
    expect(old.pragma('user_version', { simple: true })).toBe(4);
    // As a running 0.4.0 leaves it: the local sink delivered 10 records and keeps them for its replay window.
    old.exec("UPDATE sink_progress SET last_id = 10 WHERE name = 'questdb'");
    old.exec("INSERT OR REPLACE INTO sink_kept VALUES ('questdb', 1, 0)");
    old.exec("INSERT INTO dead_letters (received_ms, failed_ms, reason, line, sink) VALUES (1, 2, 'refused', '1\ts\tc\t1', 'questdb')");
    old.close();

    const queue = openQueue(dataDir);
    expect(queue.stats()).toMatchObject({ records: 30, readings: 750 });
    const reader = new QueueReader(dataDir, 'power-loss', 'questdb', { keeps: true });
    expect(reader.kept).toEqual(reader.progress);
    expect(reader.replay()).toBe(0);
    const records = reader.readOldest(10_000, Number.MAX_SAFE_INTEGER);
    expect(records).toHaveLength(30);
    expect(records.every((r) => r.site === undefined && r.sink === undefined)).toBe(true);
    reader.close();
    queue.close();
    const store = new DeadLetterStore(dataDir);
    expect(store.list(10)).toEqual([expect.objectContaining({ sink: 'questdb', site: null, line: '1\ts\tc\t1' })]);
    store.close();
    expect(readQueueFormat(queuePath(dataDir)).version).toBe(QUEUE_FORMAT);
  });

  it("writes the upgrade into the file's header at once, for tools that read only the header (an older release's board)", () => {
    const dataDir = tempDir('format');
    copyFileSync(join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'queue-v0.4.0.db'), queuePath(dataDir));
    const header = () => readFileSync(queuePath(dataDir)).readUInt32BE(60);
    expect(header()).toBe(4);
    // Open, as a trial of the new release is when the power goes: nothing closed, nothing checkpointed by a close.
    const queue = openQueue(dataDir);
    expect(header()).toBe(QUEUE_FORMAT);
    queue.close();
  });

  it('upgrades again a file that release 0.1.0 set back to format 1 after an upgrade', () => {
    const dataDir = tempDir('format');
    openQueue(dataDir).close();
    const db = new Database(queuePath(dataDir));
    db.pragma('user_version = 1');
    db.close();
    openQueue(dataDir).close();
    expect(readQueueFormat(queuePath(dataDir)).version).toBe(QUEUE_FORMAT);
  });

  it('refuses a file from a newer format, naming both versions and its release, and changes no byte', () => {
    const dataDir = tempDir('format');
    writeNewerFile(dataDir).close();
    const before = snapshot(dataDir);
    expect(Object.keys(before)).toEqual(['queue.db']);
    const refusal = (() => {
      try {
        openQueue(dataDir);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refusal).toBeInstanceOf(QueueFormatError);
    expect((refusal as Error).message).toBe(
      `queue file ${queuePath(dataDir)} has format version ${QUEUE_FORMAT + 1} (written by harbor-gateway 9.9.9), ` +
        `newer than format version ${QUEUE_FORMAT} that this release reads; nothing in it was changed. ` +
        'Run that newer release, or move the file aside to start an empty queue.',
    );
    expect(() => new DeadLetterStore(dataDir)).toThrow(QueueFormatError);
    expect(snapshot(dataDir)).toEqual(before);
  });

  it('refuses a newer file its release left with a WAL (a crash) and changes neither file', () => {
    const dataDir = tempDir('format');
    const crashed = tempDir('format');
    const db = writeNewerFile(crashed);
    db.prepare('INSERT INTO queued_in_some_new_way VALUES (?)').run('not yet checkpointed');
    // Copies taken while the writer is open: the files a crash leaves.
    copyFileSync(queuePath(crashed), queuePath(dataDir));
    copyFileSync(`${queuePath(crashed)}-wal`, `${queuePath(dataDir)}-wal`);
    db.close();
    const before = snapshot(dataDir);
    expect(() => openQueue(dataDir)).toThrow(`has format version ${QUEUE_FORMAT + 1} (written by harbor-gateway 9.9.9)`);
    const after = snapshot(dataDir);
    // The read-only check may add SQLite's shared-memory index; the data files stay as they were.
    expect(after['queue.db']).toBe(before['queue.db']);
    expect(after['queue.db-wal']).toBe(before['queue.db-wal']);
    expect(existsSync(`${queuePath(dataDir)}-wal`)).toBe(true);
  });
});
