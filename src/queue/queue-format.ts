import { closeSync, existsSync, openSync, readSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';

/**
 * The queue file's format version, kept in SQLite's `user_version`. Each step below takes a file
 * from the version before it to its own; opening an older file runs the missing steps in order.
 * Steps must be safe to run twice: 0.1.0 set `user_version = 1` on every open, so a file that
 * 0.1.0 opened after an upgrade says 1 again while already holding later steps' tables.
 */
interface FormatStep {
  version: number;
  apply: (db: Database.Database) => void;
}

const hasColumn = (db: Database.Database, table: string, column: string): boolean =>
  db
    .prepare<[], { name: string }>(`SELECT name FROM pragma_table_info('${table}')`)
    .all()
    .some((c) => c.name === column);

const STEPS: readonly FormatStep[] = [
  {
    // The format of release 0.1.0.
    version: 1,
    apply: (db) =>
      db.exec(`
CREATE TABLE IF NOT EXISTS dead_letters (
  -- AUTOINCREMENT: ids are never reused, so an operator's purge of #7 cannot hit a newer letter.
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  received_ms INTEGER NOT NULL,
  failed_ms   INTEGER NOT NULL,
  reason      TEXT    NOT NULL,
  line        TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
  id               INTEGER PRIMARY KEY CHECK (id = 1),
  added_records    INTEGER NOT NULL DEFAULT 0,
  added_readings   INTEGER NOT NULL DEFAULT 0,
  added_bytes      INTEGER NOT NULL DEFAULT 0,
  removed_records  INTEGER NOT NULL DEFAULT 0,
  removed_readings INTEGER NOT NULL DEFAULT 0,
  removed_bytes    INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO ledger (id) VALUES (1);
-- Everything up to record last_id of segment \`segment\` is in QuestDB.
CREATE TABLE IF NOT EXISTS progress (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  segment INTEGER NOT NULL,
  last_id INTEGER NOT NULL
);
INSERT OR IGNORE INTO progress VALUES (1, 1, 0);
`),
  },
  {
    // Which release brought the file to each version, so that an older release refusing the file
    // can name the release that wrote it.
    version: 2,
    apply: (db) =>
      db.exec(`
CREATE TABLE IF NOT EXISTS format_history (
  version         INTEGER PRIMARY KEY,
  applied_ms      INTEGER NOT NULL,
  gateway_version TEXT    NOT NULL
);
`),
  },
  {
    // One progress mark per sink. `progress` stays the mark every sink has passed: the records
    // behind it are counted as removed and their segments dropped. The local QuestDB sink carries on
    // from where the single mark of earlier releases stood.
    version: 3,
    apply: (db) => {
      db.exec(`
CREATE TABLE IF NOT EXISTS sink_progress (
  name    TEXT    PRIMARY KEY,
  segment INTEGER NOT NULL,
  last_id INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO sink_progress (name, segment, last_id) SELECT 'questdb', segment, last_id FROM progress WHERE id = 1;
`);
      if (!hasColumn(db, 'dead_letters', 'sink')) db.exec("ALTER TABLE dead_letters ADD COLUMN sink TEXT NOT NULL DEFAULT 'questdb'");
    },
  },
  {
    // A sink with a replay window keeps its delivered records for a while: its kept mark trails its
    // progress mark, and no segment the kept mark has not passed is dropped. A sink without a row
    // keeps nothing behind its progress mark.
    version: 4,
    apply: (db) =>
      db.exec(`
CREATE TABLE IF NOT EXISTS sink_kept (
  name    TEXT    PRIMARY KEY,
  segment INTEGER NOT NULL,
  last_id INTEGER NOT NULL
) WITHOUT ROWID;
`),
  },
  {
    // Sites and re-queues by sink. A record says which site its readings come from (NULL: this
    // gateway's own) and, for a re-queued dead letter, the one sink it goes to (NULL: every sink);
    // a dead letter keeps its site. Readings written before this step are this gateway's own.
    // The readings kept for a replay window are let go: the release that delivered them wrote no
    // site, and sending them again with one would store them a second time beside the old rows.
    version: 5,
    apply: (db) => {
      const segments = db
        .prepare<[], string>("SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB 'segment_[0-9]*'")
        .pluck()
        .all();
      for (const segment of segments) {
        for (const column of ['site', 'sink']) {
          if (!hasColumn(db, segment, column)) db.exec(`ALTER TABLE ${segment} ADD COLUMN ${column} TEXT`);
        }
      }
      if (!hasColumn(db, 'dead_letters', 'site')) db.exec('ALTER TABLE dead_letters ADD COLUMN site TEXT');
      db.exec('DELETE FROM sink_kept');
    },
  },
];

/** The format this release writes. */
export const QUEUE_FORMAT = STEPS.at(-1)!.version;

/**
 * Columns and tables added without a new format version: a build of the same format that lacks
 * them names every column it reads and writes, so it takes the file back as it is, and what it
 * writes without them keeps the meaning their absence has (NULL). Each is made where missing at
 * every open, after the steps: also on a file such a build wrote into since.
 *
 * `own_sites` and `own_site`: the name this gateway had (`SITE_ID`) when it answered a record or
 * dead letter of its own readings, as a small id into `own_sites`, so that a renamed site's
 * earlier readings keep their name without the name on every row. NULL with a NULL `site`: a
 * record of an older build, of the gateway's own site as it is named now.
 */
export function completeQueueFile(db: Database.Database): void {
  const segments = db
    .prepare<[], string>("SELECT name FROM sqlite_schema WHERE type = 'table' AND (name GLOB 'segment_[0-9]*' OR name = 'dead_letters')")
    .pluck()
    .all()
    .filter((table) => !hasColumn(db, table, 'own_site'));
  const hasOwnSites = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'own_sites'").get() !== undefined;
  if (segments.length === 0 && hasOwnSites) return;
  db.transaction(() => {
    db.exec(`CREATE TABLE IF NOT EXISTS own_sites (
  id       INTEGER PRIMARY KEY,
  name     TEXT    NOT NULL UNIQUE,
  first_ms INTEGER NOT NULL
)`);
    for (const table of segments) if (!hasColumn(db, table, 'own_site')) db.exec(`ALTER TABLE ${table} ADD COLUMN own_site INTEGER`);
  }).immediate();
}

/** A queue file written by a newer release: refused before anything in it is changed. */
export class QueueFormatError extends Error {
  override name = 'QueueFormatError';
  constructor(
    readonly path: string,
    readonly fileFormat: number,
    readonly writtenBy: string | undefined,
  ) {
    super(
      `queue file ${path} has format version ${fileFormat}${writtenBy === undefined ? '' : ` (written by harbor-gateway ${writtenBy})`}, ` +
        `newer than format version ${QUEUE_FORMAT} that this release reads; nothing in it was changed. ` +
        'Run that newer release, or move the file aside to start an empty queue.',
    );
  }
}

const HEADER_BYTES = 100;
const USER_VERSION_OFFSET = 60;

/**
 * The format version the file's header holds, whatever its WAL says: what an older release's tools
 * read. 0 for a file shorter than a header (a queue not created yet, which the gateway creates in place).
 */
export function headerFormat(path: string): number {
  const header = Buffer.alloc(HEADER_BYTES);
  const fd = openSync(path, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, HEADER_BYTES, 0);
  } finally {
    closeSync(fd);
  }
  return read < HEADER_BYTES ? 0 : header.readUInt32BE(USER_VERSION_OFFSET);
}

/**
 * The file's format version and the release that wrote it, read without writing anything: from the
 * database header when no WAL is beside it (the header is then current), else through a read-only
 * connection, which leaves a WAL for the writer that owns it. That connection makes the WAL and
 * shared-memory files when they are missing; they are removed again, empty as they were made.
 */
export function readQueueFormat(path: string): { version: number; writtenBy: string | undefined } {
  if (!existsSync(path)) return { version: 0, writtenBy: undefined };
  if (!existsSync(`${path}-wal`)) {
    const version = headerFormat(path);
    if (version <= QUEUE_FORMAT) return { version, writtenBy: undefined };
  }
  const made = [`${path}-wal`, `${path}-shm`].filter((file) => !existsSync(file));
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    return { version, writtenBy: version > QUEUE_FORMAT ? writerOf(db, version) : undefined };
  } finally {
    db.close();
    for (const file of made) rmSync(file, { force: true });
  }
}

function writerOf(db: Database.Database, version: number): string | undefined {
  const hasHistory = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'format_history'").get() !== undefined;
  if (!hasHistory) return undefined;
  return db.prepare<[number], string>('SELECT gateway_version FROM format_history WHERE version = ?').pluck().get(version);
}

/** Refuses a file from a newer release; call before opening it for writing. */
export function assertReadableFormat(path: string): void {
  const { version, writtenBy } = readQueueFormat(path);
  if (version > QUEUE_FORMAT) throw new QueueFormatError(path, version, writtenBy);
}

/**
 * Brings an open queue file to QUEUE_FORMAT, one step per transaction, oldest first. Reads the
 * version again inside the write lock, so a newer release upgrading the file meanwhile is refused.
 * True when it upgraded the file.
 */
export function migrateQueueFile(db: Database.Database, path: string, gatewayVersion: string, now = Date.now()): boolean {
  let upgraded = false;
  for (const step of STEPS) {
    db.transaction(() => {
      const version = db.pragma('user_version', { simple: true }) as number;
      if (version > QUEUE_FORMAT) throw new QueueFormatError(path, version, writerOf(db, version));
      if (version >= step.version) return;
      step.apply(db);
      db.pragma(`user_version = ${step.version}`);
      upgraded = true;
      // format_history exists from version 2 on.
      if (step.version >= 2) {
        db.prepare('INSERT OR REPLACE INTO format_history (version, applied_ms, gateway_version) VALUES (?, ?, ?)').run(
          step.version,
          now,
          gatewayVersion,
        );
      }
    }).immediate();
  }
  return upgraded;
}
