import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

export type Durability = 'power-loss' | 'process-crash';

const SCHEMA_VERSION = 1;

/**
 * One table of records (one per request), the dead letters, and a one-row `totals` table that
 * triggers keep equal to the sums over `queue` in the same transaction as every change, whoever
 * makes it: the ingest thread, the flusher thread or the operator's CLI.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS queue (
  id          INTEGER PRIMARY KEY,
  received_ms INTEGER NOT NULL,
  readings    INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,
  payload     TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
  -- AUTOINCREMENT: ids are never reused, so an operator's purge of #7 cannot hit a newer letter.
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  received_ms INTEGER NOT NULL,
  failed_ms   INTEGER NOT NULL,
  reason      TEXT    NOT NULL,
  line        TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS totals (
  id       INTEGER PRIMARY KEY CHECK (id = 1),
  records  INTEGER NOT NULL,
  readings INTEGER NOT NULL,
  bytes    INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals
  SELECT 1, COUNT(*), COALESCE(SUM(readings), 0), COALESCE(SUM(bytes), 0) FROM queue;
CREATE TRIGGER IF NOT EXISTS queue_added AFTER INSERT ON queue BEGIN
  UPDATE totals SET records = records + 1, readings = readings + NEW.readings, bytes = bytes + NEW.bytes WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS queue_removed AFTER DELETE ON queue BEGIN
  UPDATE totals SET records = records - 1, readings = readings - OLD.readings, bytes = bytes - OLD.bytes WHERE id = 1;
END;
`;

export const queuePath = (dataDir: string): string => join(dataDir, 'queue.db');

export interface Totals {
  records: number;
  readings: number;
  bytes: number;
}

/** Opens (and on first use creates) the queue file with the pragmas every connection needs. */
export function openQueueFile(dataDir: string, durability: Durability, options: { create: boolean }): Database.Database {
  if (options.create) mkdirSync(dataDir, { recursive: true, mode: 0o750 });
  const db = new Database(queuePath(dataDir), { fileMustExist: !options.create });
  db.pragma('journal_mode = WAL');
  // FULL fsyncs the WAL on every commit; NORMAL leaves commits in the OS page cache until checkpoint.
  db.pragma(`synchronous = ${durability === 'power-loss' ? 'FULL' : 'NORMAL'}`);
  // Two threads write the file (ingest appends, flusher deletes); a writer waits for the other.
  db.pragma('busy_timeout = 10000');
  db.pragma('journal_size_limit = 67108864');
  if (options.create) {
    // Lets free pages go back to the file system after a long outage; takes effect on new files.
    db.pragma('auto_vacuum = INCREMENTAL');
    db.exec(SCHEMA);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }
  return db;
}

/** A cheap way to read the totals row. */
export function totalsReader(db: Database.Database): () => Totals {
  const statement = db.prepare<[], Totals>('SELECT records, readings, bytes FROM totals WHERE id = 1');
  return () => statement.get() ?? { records: 0, readings: 0, bytes: 0 };
}
