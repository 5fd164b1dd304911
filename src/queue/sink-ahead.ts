import type Database from 'better-sqlite3';
import type { Progress } from './queue-file.js';

/**
 * A current-first sink's records delivered ahead of its mark (`sink_ahead`): after an outage it
 * sends the newest records first and backfills the rest behind them. The range `(from, to]` is
 * delivered; the records after the mark up to `from` are its backlog. When the backlog reaches
 * `from`, the mark moves to `to` and the range is gone, in one transaction. At most one range a
 * sink: the records after `to` are sent as they come, growing it.
 *
 * Made at the reader's start, not by a format step (queue-format.ts), like `sink_state`: an older
 * release passes the table by and sends the range again from its mark, which deduplication at the
 * destination stores once.
 */
export interface AheadRange {
  from: Progress;
  to: Progress;
}

const CREATE = `CREATE TABLE IF NOT EXISTS sink_ahead (
  name         TEXT    PRIMARY KEY,
  from_segment INTEGER NOT NULL,
  from_id      INTEGER NOT NULL,
  to_segment   INTEGER NOT NULL,
  to_id        INTEGER NOT NULL
) WITHOUT ROWID`;

export function createSinkAhead(db: Database.Database): void {
  db.exec(CREATE);
}

const hasTable = (db: Database.Database): boolean =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sink_ahead'").get() !== undefined;

export function readAhead(db: Database.Database, name: string): AheadRange | undefined {
  if (!hasTable(db)) return undefined;
  const row = db
    .prepare<[string], [number, number, number, number]>('SELECT from_segment, from_id, to_segment, to_id FROM sink_ahead WHERE name = ?')
    .raw(true)
    .get(name);
  return row === undefined ? undefined : { from: { segment: row[0], lastId: row[1] }, to: { segment: row[2], lastId: row[3] } };
}

/** Every sink's range, for the backlog counts at open. */
export function readAllAhead(db: Database.Database): Map<string, AheadRange> {
  if (!hasTable(db)) return new Map();
  const rows = db
    .prepare<[], [string, number, number, number, number]>('SELECT name, from_segment, from_id, to_segment, to_id FROM sink_ahead')
    .raw(true)
    .all();
  return new Map(rows.map(([name, fs, fi, ts, ti]) => [name, { from: { segment: fs, lastId: fi }, to: { segment: ts, lastId: ti } }]));
}

export function writeAhead(db: Database.Database, name: string, range: AheadRange | undefined): void {
  if (range === undefined) {
    if (hasTable(db)) db.prepare('DELETE FROM sink_ahead WHERE name = ?').run(name);
    return;
  }
  db.prepare('INSERT OR REPLACE INTO sink_ahead (name, from_segment, from_id, to_segment, to_id) VALUES (?, ?, ?, ?, ?)').run(
    name,
    range.from.segment,
    range.from.lastId,
    range.to.segment,
    range.to.lastId,
  );
}
