import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { countAdded, listSegments, openQueueFile, queuePath, segmentInsert } from './queue-file.js';

export interface DeadLetter {
  id: number;
  receivedMs: number;
  failedMs: number;
  /** The sink whose destination refused it. */
  sink: string;
  reason: string;
  /** The reading(s) as record lines: `time_ns \t ship_id \t cargo_id \t value`. */
  line: string;
}

/** Which dead letters an operation applies to: all of them, or these ids. */
export type Selection = 'all' | readonly number[];

/**
 * Dead letters as an operator sees them, from another connection to the queue file (the gateway
 * may be running: SQLite serialises the writers, and the ledger keeps the queue totals right).
 * Changes are immediate transactions: one that began by reading could not become a write after a
 * gateway's commit (SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out).
 */
export class DeadLetterStore {
  readonly #db: Database.Database;

  constructor(dataDir: string) {
    const path = queuePath(dataDir);
    if (!existsSync(path)) throw new Error(`no queue at ${path}`);
    // The operator's changes are rare and precious: fsynced whatever the gateway's mode.
    this.#db = openQueueFile(dataDir, 'power-loss', { create: false });
  }

  count(): number {
    return (this.#db.prepare('SELECT COUNT(*) AS n FROM dead_letters').get() as { n: number }).n;
  }

  list(limit: number, afterId = 0): DeadLetter[] {
    return this.#db
      .prepare(
        'SELECT id, received_ms AS receivedMs, failed_ms AS failedMs, sink, reason, line FROM dead_letters WHERE id > ? ORDER BY id LIMIT ?',
      )
      .all(afterId, limit) as DeadLetter[];
  }

  /** Puts the selected dead letters back at the end of the queue; returns how many. */
  requeue(selection: Selection): number {
    const remove = this.#db.prepare('DELETE FROM dead_letters WHERE id = ?');
    return this.#db
      .transaction(() => {
        // At the end of the queue: the newest segment, the one the ingest thread appends to.
        const insert = segmentInsert(this.#db, listSegments(this.#db).at(-1)!);
        const letters = this.#select(selection);
        for (const letter of letters) {
          const readings = letter.line.split('\n').length;
          const bytes = Buffer.byteLength(letter.line);
          insert.run(letter.receivedMs, readings, bytes, letter.line);
          // The ingest thread counts its own appends; what others add goes into the ledger.
          countAdded(this.#db, { records: 1, readings, bytes });
          remove.run(letter.id);
        }
        return letters.length;
      })
      .immediate();
  }

  /** Deletes the selected dead letters for good; returns how many. */
  purge(selection: Selection): number {
    const remove = this.#db.prepare('DELETE FROM dead_letters WHERE id = ?');
    return this.#db
      .transaction(() => {
        const letters = this.#select(selection);
        for (const letter of letters) remove.run(letter.id);
        return letters.length;
      })
      .immediate();
  }

  close(): void {
    this.#db.close();
  }

  #select(selection: Selection): DeadLetter[] {
    const all = this.#db
      .prepare('SELECT id, received_ms AS receivedMs, failed_ms AS failedMs, sink, reason, line FROM dead_letters ORDER BY id')
      .all() as DeadLetter[];
    if (selection === 'all') return all;
    const wanted = new Set(selection);
    return all.filter((letter) => wanted.has(letter.id));
  }
}
