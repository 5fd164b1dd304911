import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { countAdded, listSegments, openQueueFile, queuePath, segmentInsert, type Durability } from './queue-file.js';
import { QueueRefusedError, classifyWriteError } from './queue-errors.js';
import type { SideWrite } from './queue-writer.js';

export interface DeadLetter {
  id: number;
  receivedMs: number;
  failedMs: number;
  /** The sink whose destination refused it, and the only one a re-queue sends it to. */
  sink: string;
  /**
   * The site its readings come from: another site's, or this gateway's name when it answered them;
   * null for its own readings queued without a name (its site as named now).
   */
  site: string | null;
  /** For this gateway's own readings, the id of that name (`own_sites`); a re-queue keeps it. */
  ownSite: number | null;
  reason: string;
  /** The reading(s) as record lines: `time_ns \t ship_id \t cargo_id \t value`. */
  line: string;
}

/** Which dead letters an operation applies to: all of them, or these ids; `sink` narrows either to that sink's letters. */
export interface Selection {
  ids: 'all' | readonly number[];
  sink?: string;
}

const COLUMNS =
  'd.id AS id, received_ms AS receivedMs, failed_ms AS failedMs, sink, COALESCE(site, o.name) AS site, own_site AS ownSite, reason, line';
/** Dead letters with the name of this gateway's site they were answered under. */
const LETTERS = 'dead_letters d LEFT JOIN own_sites o ON o.id = d.own_site';

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

  /** Up to `limit` letters after `afterId`, oldest first; of `sink` only when given. */
  list(limit: number, afterId = 0, sink?: string): DeadLetter[] {
    const where = sink === undefined ? '' : 'AND sink = ?';
    const parameters = sink === undefined ? [afterId, limit] : [afterId, sink, limit];
    return this.#db
      .prepare(`SELECT ${COLUMNS} FROM ${LETTERS} WHERE d.id > ? ${where} ORDER BY d.id LIMIT ?`)
      .all(...parameters) as DeadLetter[];
  }

  /**
   * Puts the selected dead letters back at the end of the queue, each for the sink that refused it
   * alone (the other sinks delivered those readings already), or for every sink when it was refused
   * at ingest (INGEST_SOURCES); returns how many, by sink (or source).
   */
  requeue(selection: Selection): Map<string, number> {
    const remove = this.#db.prepare('DELETE FROM dead_letters WHERE id = ?');
    return this.#db
      .transaction(() => {
        // At the end of the queue: the newest segment, the one the ingest thread appends to.
        const insert = segmentInsert(this.#db, listSegments(this.#db).at(-1)!);
        const bySink = new Map<string, number>();
        for (const letter of this.#select(selection)) {
          const readings = letter.line.split('\n').length;
          const bytes = Buffer.byteLength(letter.line);
          const forSink = INGEST_SOURCES.has(letter.sink) ? null : letter.sink;
          // Its own readings keep the name they were answered under, by its id.
          const site = letter.ownSite === null ? letter.site : null;
          insert.run(letter.receivedMs, readings, bytes, letter.line, site, forSink, letter.ownSite);
          // The ingest thread counts its own appends; what others add goes into the ledger.
          countAdded(this.#db, { records: 1, readings, bytes });
          remove.run(letter.id);
          bySink.set(letter.sink, (bySink.get(letter.sink) ?? 0) + 1);
        }
        return bySink;
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
    const all = this.#db.prepare(`SELECT ${COLUMNS} FROM ${LETTERS} ORDER BY d.id`).all() as DeadLetter[];
    const ofSink = selection.sink === undefined ? all : all.filter((letter) => letter.sink === selection.sink);
    if (selection.ids === 'all') return ofSink;
    const wanted = new Set(selection.ids);
    return ofSink.filter((letter) => wanted.has(letter.id));
  }
}

/**
 * The `sink` of a dead letter refused at ingest (IngestDeadLetters): no sink ever had its readings,
 * so a re-queue sends them to every sink.
 */
export const INGEST_SOURCES: ReadonlySet<string> = new Set(['mqtt', 'mqtt-subscribe']);

/** A message refused at ingest whose sender cannot be told (MQTT 3.1.1, QoS 0, a subscription). */
export interface IngestRefusal {
  receivedMs: number;
  /** The ingest it came through, kept as the dead letter's `sink`: `mqtt`, `mqtt-subscribe`. */
  source: string;
  reason: string;
  /** Its readings as record lines when it held valid ones, else the payload as received. */
  line: string;
}

interface PendingRefusal {
  refusal: IngestRefusal;
  side: SideWrite | undefined;
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * Dead letters made at ingest, on a connection of their own: added in one transaction per turn of
 * the event loop (as appends are), each promise settled once its row is committed, so a message is
 * acknowledged only after its refusal is as durable as an accepted reading would be. At most
 * `maxRows` of a source are kept: beyond them `add` is refused, and the sender is not acknowledged.
 */
export class IngestDeadLetters {
  readonly #db: Database.Database;
  readonly #insertAll: (batch: readonly PendingRefusal[]) => void;
  readonly #count: Database.Statement<[string], { n: number }>;
  readonly #counts = new Map<string, number>();
  readonly #sideStatements = new Map<string, Database.Statement>();
  #pending: PendingRefusal[] = [];

  constructor(
    dataDir: string,
    durability: Durability,
    readonly maxRows = 100_000,
  ) {
    this.#db = openQueueFile(dataDir, durability, { create: false });
    const insert = this.#db.prepare<[number, number, string, string, string]>(
      'INSERT INTO dead_letters (received_ms, failed_ms, reason, line, sink) VALUES (?, ?, ?, ?, ?)',
    );
    this.#insertAll = this.#db.transaction((batch: readonly PendingRefusal[]) => {
      const now = Date.now();
      for (const { refusal: r, side } of batch) {
        insert.run(r.receivedMs, now, r.reason, r.line, r.source);
        if (side !== undefined) this.#sideStatement(side.sql).run(...side.params);
      }
    });
    this.#count = this.#db.prepare('SELECT COUNT(*) AS n FROM dead_letters WHERE sink = ?');
  }

  /** Keeps `refusal`, and commits `side` in the same transaction (queue-writer.ts `SideWrite`). */
  add(refusal: IngestRefusal, side?: SideWrite): Promise<void> {
    // Counted from the file when at the bound: an operator may have purged some meanwhile.
    let count = this.#counts.get(refusal.source) ?? this.#recount(refusal.source);
    if (count >= this.maxRows) count = this.#recount(refusal.source);
    if (count >= this.maxRows) {
      return Promise.reject(
        new QueueRefusedError('full', `${this.maxRows} dead letters of ${refusal.source} are kept; purge or re-queue them`),
      );
    }
    this.#counts.set(refusal.source, count + 1);
    return new Promise((resolve, reject) => {
      if (this.#pending.push({ refusal, side, resolve, reject }) === 1) setImmediate(this.#commit);
    });
  }

  close(): void {
    this.#commit();
    this.#db.close();
  }

  readonly #commit = (): void => {
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    try {
      this.#insertAll(batch);
    } catch (error) {
      this.#counts.clear();
      const refusal = classifyWriteError(error);
      for (const p of batch) p.reject(refusal);
      return;
    }
    for (const p of batch) p.resolve();
  };

  #sideStatement(sql: string): Database.Statement {
    let statement = this.#sideStatements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#sideStatements.set(sql, statement);
    }
    return statement;
  }

  #recount(source: string): number {
    const count = this.#count.get(source)?.n ?? 0;
    this.#counts.set(source, count);
    return count;
  }
}
