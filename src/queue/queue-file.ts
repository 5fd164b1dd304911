import { closeSync, fstatSync, fsyncSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { fsyncPath, makeDirectoryDurably } from '../durable-file.js';
import { VERSION } from '../version.js';
import { assertReadableFormat, completeQueueFile, headerFormat, migrateQueueFile, QUEUE_FORMAT } from './queue-format.js';

export type Durability = 'power-loss' | 'process-crash';

/**
 * The queue file. Records (one per request) go into numbered segment tables: the ingest thread
 * appends to the newest one and starts a new one when it is full; each sink reads from its own
 * mark onwards and moves it past what its destination confirmed, and whole segments every sink has
 * passed are dropped (sink-marks.ts). Dropping a table frees its pages without rewriting them, which deleting rows one by
 * one does not: a third of the bytes an SD card would otherwise write per reading.
 *
 * The `ledger` row counts what others than the ingest thread add to and take from the queue (the
 * sinks moving the common mark, the operator re-queueing dead letters), in the transaction of the
 * change; the ingest thread counts its own appends in memory, so a commit rewrites no counter page.
 * Those tables come from the format steps in queue-format.ts; the segments are made here.
 */
const segmentTable = (segment: number): string => `segment_${segment}`;

/**
 * Creates segment `n` (no-op when it exists). `site`: the site a record's readings come from, NULL
 * for this gateway's own; `own_site`: for this gateway's own, the name it had when it answered them
 * (an id into `own_sites`, a byte or two: see completeQueueFile); `sink`: the one sink a re-queued
 * dead letter is for, NULL for every sink.
 */
export function createSegment(db: Database.Database, segment: number): void {
  db.exec(
    `CREATE TABLE IF NOT EXISTS ${segmentTable(segment)} (
      id          INTEGER PRIMARY KEY,
      received_ms INTEGER NOT NULL,
      readings    INTEGER NOT NULL,
      bytes       INTEGER NOT NULL,
      payload     TEXT    NOT NULL,
      site        TEXT,
      sink        TEXT,
      own_site    INTEGER
    )`,
  );
}

export function dropSegment(db: Database.Database, segment: number): void {
  db.exec(`DROP TABLE IF EXISTS ${segmentTable(segment)}`);
}

/** The segments in the file, oldest first. */
export function listSegments(db: Database.Database): number[] {
  return segmentNumbers(segmentNames(db).all());
}

/** The statement listing the segment tables' names, for a connection that lists them often. */
export function segmentNames(db: Database.Database): Database.Statement<[], string> {
  return db.prepare<[], string>("SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB 'segment_[0-9]*'").pluck();
}

/** Segment numbers of the names `segmentNames` lists, oldest first. */
export function segmentNumbers(names: readonly string[]): number[] {
  return names.map((name) => Number(name.slice('segment_'.length))).sort((a, b) => a - b);
}

/**
 * Appends to segment `n`: received_ms, readings, bytes, payload, site (null: this gateway's), sink
 * (null: every sink), own_site (this gateway's name when it answered them, as its id; null for another site's).
 */
export function segmentInsert(
  db: Database.Database,
  segment: number,
): Database.Statement<[number, number, number, string, string | null, string | null, number | null]> {
  return db.prepare(
    `INSERT INTO ${segmentTable(segment)} (received_ms, readings, bytes, payload, site, sink, own_site) VALUES (?, ?, ?, ?, ?, ?, ?)`,
  );
}

/** A record as `segmentRecordsAfter` reads it. */
export type SegmentRow = [
  id: number,
  receivedMs: number,
  readings: number,
  bytes: number,
  payload: string,
  site: string | null,
  sink: string | null,
  ownSite: number | null,
];

/** Records of segment `n` after an id, oldest first. */
export function segmentRecordsAfter(db: Database.Database, segment: number): Database.Statement<[number], SegmentRow> {
  return db
    .prepare<[number], SegmentRow>(
      `SELECT id, received_ms, readings, bytes, payload, site, sink, own_site FROM ${segmentTable(segment)} WHERE id > ? ORDER BY id`,
    )
    .raw(true);
}

export const queuePath = (dataDir: string): string => join(dataDir, 'queue.db');

/**
 * The newest `received_ms` in the file: of the newest segment that has records (a dead letter
 * re-queued there keeps its old time, so the whole segment, at most 16,384 records). The file always
 * holds its newest record: a segment is dropped only once every sink passed a later one.
 */
export function newestReceivedMs(db: Database.Database): number | undefined {
  for (const segment of listSegments(db).reverse()) {
    const newest = db
      .prepare<[], number | null>(`SELECT MAX(received_ms) FROM ${segmentTable(segment)}`)
      .pluck()
      .get();
    if (newest !== null && newest !== undefined) return newest;
  }
  return undefined;
}

export interface Totals {
  records: number;
  readings: number;
  bytes: number;
}

export interface Ledger {
  added: Totals;
  removed: Totals;
}

export interface Progress {
  segment: number;
  lastId: number;
}

/** The data directory, its name and every name above it durable (see `makeDirectoryDurably`); returns its real path. */
export function makeDataDir(dataDir: string): string {
  return makeDirectoryDurably(dataDir, 0o750);
}

/**
 * Puts on the disk what an earlier process left in the WAL, before SQLite reads it. After an fsync
 * that failed, the kernel keeps the unwritten pages readable but no longer writes them
 * ("fsyncgate"): SQLite's recovery takes a commit whose fsync failed as committed, and a power cut
 * then takes it and every commit after it, the new run's answered ones included, as the log's
 * checksums break there. Rewriting the log's own bytes and fsyncing them makes them durable. Only
 * after an unclean stop: a clean close leaves no log.
 */
function settleLeftLog(walPath: string): void {
  let fd: number;
  try {
    fd = openSync(walPath, 'r+');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    const size = fstatSync(fd).size;
    const chunk = Buffer.allocUnsafe(Math.min(size, 1024 * 1024));
    for (let offset = 0; offset < size; ) {
      const read = readSync(fd, chunk, 0, Math.min(chunk.length, size - offset), offset);
      if (read === 0) break;
      writeSync(fd, chunk, 0, read, offset);
      offset += read;
    }
    if (size > 0) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens (and on first use creates) the queue file with the pragmas every connection needs.
 * `syncedElsewhere`: in `power-loss` mode, the caller syncs the log after each commit itself
 * (log-sync.ts), off the event loop; every other connection has SQLite sync each commit.
 */
export function openQueueFile(
  dataDir: string,
  durability: Durability,
  options: { create: boolean; syncedElsewhere?: boolean },
): Database.Database {
  if (options.create) makeDataDir(dataDir);
  const path = queuePath(dataDir);
  // Before the first write: even the journal mode pragma below may change a newer release's file.
  assertReadableFormat(path);
  // The writer opens first and alone (the gateway owns the directory); readers open a live log.
  if (options.create) settleLeftLog(`${path}-wal`);
  const isNew = (statSync(path, { throwIfNoEntry: false })?.size ?? 0) === 0;
  const db = new Database(path, { fileMustExist: !options.create });
  // Both only on a new file, before its first write (the journal mode below is one): on an existing
  // file either pragma is a write, made before the names below are durable.
  // 1 KiB pages: a commit of a few dozen single readings rewrites a few small pages instead of a
  // few large ones, about a third fewer bytes written per reading.
  if (isNew) db.pragma('page_size = 1024');
  // Lets free pages go back to the file system after a long outage or a full disk; older files are
  // converted below.
  if (isNew) db.pragma('auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  // FULL fsyncs the WAL on every commit; NORMAL leaves commits in the OS page cache until checkpoint.
  // In power-loss mode the sinks' commits are synced too, though losing one would only send
  // readings again: a commit SQLite has indexed but not synced is lost when a later fsync fails and
  // the kernel drops the file's unwritten pages, and recovery after a power cut then ends the log at
  // that hole, dropping the answered commits behind it (docs/history/benchmarks.md, "Bytes written per
  // reading"). Ingest's commits are synced by ingest (log-sync.ts), which answers none after such a
  // failure.
  db.pragma(`synchronous = ${durability === 'power-loss' && options.syncedElsewhere !== true ? 'FULL' : 'NORMAL'}`);
  // Two threads write the file (ingest appends, the sinks' marks); a writer waits for the other.
  db.pragma('busy_timeout = 10000');
  db.pragma('journal_size_limit = 67108864');
  // The queue checkpoints itself, so that a failed checkpoint is seen (checkpoint.ts).
  db.pragma('wal_autocheckpoint = 0');
  // 2 MiB of page cache per connection; the build's default is 16 MiB.
  db.pragma('cache_size = -2048');
  // The names of the queue file and its WAL are made durable here, and a failed fsync fails the
  // open (the next start tries again): SQLite fsyncs the directory once after creating a WAL but
  // ignores that fsync's error, and never for the database file. After such a failure a power cut
  // takes the WAL with every commit in it, fsynced or not, or brings back the WAL a clean close
  // deleted, whose old pages would be replayed over newer ones.
  try {
    // An existing file's WAL was opened by the pragma above, before any write.
    fsyncPath(dataDir);
    // Or an older format in the header (0 is a file not yet checkpointed): a start that upgraded and
    // then failed left the new format in the log only.
    const upgraded = migrateQueueFile(db, path, VERSION);
    const header = headerFormat(path);
    if (upgraded || (header !== 0 && header !== QUEUE_FORMAT)) {
      // An older release's tools read the format from the file's header alone (the appliance board
      // deciding, after a failed trial, whether the queue is one its gateway can read): the upgrade
      // is copied from the log into the file, and synced, before anything is answered.
      // It waits for readers up to busy_timeout; one still reading an older snapshot fails the open
      // (the next start tries again) rather than leave the header saying the older format.
      const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as [{ busy: number; log: number; checkpointed: number }];
      if (result.busy !== 0 || result.log !== result.checkpointed)
        throw new Error(`the queue's format upgrade could not be copied into ${path}: another process is reading it`);
      fsyncPath(path);
    }
    completeQueueFile(db);
    if (options.create && listSegments(db).length === 0) createSegment(db, readProgress(db).segment);
    if (options.create) enableIncrementalVacuum(db);
    // A new file's WAL appears with its first write, above.
    if (options.create) fsyncPath(dataDir);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Files made before the pragma order above have no incremental vacuum, so their free pages never go
 * back to the file system. A small one is rewritten with it at open (VACUUM, before any other
 * connection); a large one keeps working without, until it is small at some start.
 */
const CONVERT_MAX_BYTES = 32 * 1024 * 1024;

function enableIncrementalVacuum(db: Database.Database): void {
  if ((db.pragma('auto_vacuum', { simple: true }) as number) !== 0) return;
  const bytes = (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
  if (bytes > CONVERT_MAX_BYTES) return;
  try {
    db.pragma('auto_vacuum = INCREMENTAL');
    db.exec('VACUUM');
  } catch {
    // No room for the copy VACUUM makes, or another connection is open: the next start tries again.
  }
}

export function readProgress(db: Database.Database): Progress {
  const row = db.prepare<[], [number, number]>('SELECT segment, last_id FROM progress WHERE id = 1').raw(true).get();
  return { segment: row?.[0] ?? 1, lastId: row?.[1] ?? 0 };
}

/** The sums over the records not yet in QuestDB: a scan, for opening. */
export function countQueued(db: Database.Database): Totals {
  const progress = readProgress(db);
  const totals = { records: 0, readings: 0, bytes: 0 };
  for (const segment of listSegments(db)) {
    if (segment < progress.segment) continue;
    const row = db
      .prepare<[number], [number, number, number]>(
        `SELECT COUNT(*), COALESCE(SUM(readings), 0), COALESCE(SUM(bytes), 0) FROM ${segmentTable(segment)} WHERE id > ?`,
      )
      .raw(true)
      .get(segment === progress.segment ? progress.lastId : 0)!;
    totals.records += row[0];
    totals.readings += row[1];
    totals.bytes += row[2];
  }
  return totals;
}

/** A cheap way to read the ledger row. */
export function ledgerReader(db: Database.Database): () => Ledger {
  const statement = db
    .prepare<[], [number, number, number, number, number, number]>(
      'SELECT added_records, added_readings, added_bytes, removed_records, removed_readings, removed_bytes FROM ledger WHERE id = 1',
    )
    .raw(true);
  return () => {
    const [ar, an, ab, rr, rn, rb] = statement.get() ?? [0, 0, 0, 0, 0, 0];
    return { added: { records: ar, readings: an, bytes: ab }, removed: { records: rr, readings: rn, bytes: rb } };
  };
}

/** Records the operator (or anyone but the ingest thread) added, in the caller's transaction. */
export function countAdded(db: Database.Database, added: Totals): void {
  db.prepare<[number, number, number]>(
    'UPDATE ledger SET added_records = added_records + ?, added_readings = added_readings + ?, added_bytes = added_bytes + ? WHERE id = 1',
  ).run(added.records, added.readings, added.bytes);
}

/**
 * The id of this gateway's site name in `own_sites`, added when the name is new: what a record of
 * its own readings keeps of the name it was answered under.
 */
export function ownSiteId(db: Database.Database, name: string, now = Date.now()): number {
  const find = db.prepare<[string], number>('SELECT id FROM own_sites WHERE name = ?').pluck();
  // Read first: a start writes nothing when the name is known, which a full disk needs.
  return (
    find.get(name) ??
    db
      .transaction(() => {
        db.prepare('INSERT OR IGNORE INTO own_sites (name, first_ms) VALUES (?, ?)').run(name, now);
        return find.get(name)!;
      })
      .immediate()
  );
}

/** The names this gateway had, by their id in `own_sites`. */
export function ownSiteNames(db: Database.Database): Map<number, string> {
  return new Map(db.prepare<[], [number, string]>('SELECT id, name FROM own_sites').raw(true).all());
}
