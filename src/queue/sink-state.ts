import type Database from 'better-sqlite3';

/**
 * State a sink derives from the records it passed (a forwarding sink's thinning), kept beside its
 * mark and written in the same transaction: what it decides for the next records is then the same
 * after a crash as without one. A row per sink and key, the value as text the sink encodes.
 *
 * Made at the reader's start, not by a format step (queue-format.ts): an older release opening the
 * file passes a table it does not know by, and sends everything whole, as it did.
 */
const CREATE = `CREATE TABLE IF NOT EXISTS sink_state (
  name  TEXT NOT NULL,
  key   TEXT NOT NULL,
  state TEXT NOT NULL,
  PRIMARY KEY (name, key)
) WITHOUT ROWID`;

/** Changes to a sink's state: a key's new text, or undefined to remove it. */
export type SinkStateChanges = ReadonlyMap<string, string | undefined>;

export function createSinkState(db: Database.Database): void {
  db.exec(CREATE);
}

export function readSinkState(db: Database.Database, name: string): Map<string, string> {
  const rows = db.prepare<[string], [string, string]>('SELECT key, state FROM sink_state WHERE name = ?').raw(true).all(name);
  return new Map(rows);
}

/** A writer of one sink's changes, prepared once: run it inside the transaction that moves the sink's mark. */
export function sinkStateWriter(db: Database.Database, name: string): (changes: SinkStateChanges) => void {
  const put = db.prepare<[string, string, string]>('INSERT OR REPLACE INTO sink_state (name, key, state) VALUES (?, ?, ?)');
  const remove = db.prepare<[string, string]>('DELETE FROM sink_state WHERE name = ? AND key = ?');
  return (changes) => {
    for (const [key, state] of changes) {
      if (state === undefined) remove.run(name, key);
      else put.run(name, key, state);
    }
  };
}

/** A removed sink's state goes with its mark; a sink added again under its name starts without. */
export function forgetSinkState(db: Database.Database, name: string): void {
  const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sink_state'").get();
  if (exists !== undefined) db.prepare('DELETE FROM sink_state WHERE name = ?').run(name);
}
