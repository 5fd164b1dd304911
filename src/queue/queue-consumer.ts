import type Database from 'better-sqlite3';
import { openQueueFile, totalsReader, type Durability } from './queue-file.js';

/** One request's readings, as stored. */
export interface QueueRecord {
  id: number;
  receivedMs: number;
  readings: number;
  payload: string;
}

export interface DeadLetterInput {
  /** The record the reading came from. */
  recordId: number;
  receivedMs: number;
  reason: string;
  /** The reading as a record line (see record-codec), or a whole corrupt record. */
  line: string;
}

/** Records removed in one `complete`, for the ingest side's accounting and the logs. */
export interface Completion {
  records: number;
  readings: number;
  deadLettered: number;
}

/** Deletes happen in transactions of at most this many records, so the ingest side never waits long for the lock. */
const DELETE_CHUNK = 2000;

/**
 * The flusher's side of the queue, on its own connection: reads the oldest records and removes
 * them, with the readings QuestDB refused moved to the dead letters in the same transaction.
 */
export class QueueConsumer {
  readonly #db: Database.Database;
  readonly #selectOldest: Database.Statement<[], [number, number, number, string]>;
  readonly #readTotals: () => { readings: number };
  readonly #removeChunk: (lastId: number, deadLetters: readonly DeadLetterInput[], failedMs: number) => void;

  constructor(dataDir: string, durability: Durability) {
    this.#db = openQueueFile(dataDir, durability, { create: false });
    const db = this.#db;
    this.#selectOldest = db.prepare<[], [number, number, number, string]>('SELECT id, received_ms, readings, payload FROM queue ORDER BY id').raw(true);
    this.#readTotals = totalsReader(db);
    const deleteUpTo = db.prepare<[number]>('DELETE FROM queue WHERE id <= ?');
    const insertDeadLetter = db.prepare<[number, number, string, string]>(
      'INSERT INTO dead_letters (received_ms, failed_ms, reason, line) VALUES (?, ?, ?, ?)',
    );
    this.#removeChunk = db.transaction((lastId: number, deadLetters: readonly DeadLetterInput[], failedMs: number) => {
      for (const d of deadLetters) insertDeadLetter.run(d.receivedMs, failedMs, d.reason, d.line);
      deleteUpTo.run(lastId);
    });
  }

  /** Readings waiting in the queue (all of them, whoever added them). */
  backlog(): number {
    return this.#readTotals().readings;
  }

  /** The oldest records, in order, until `maxReadings` or `maxBytes` is reached (at least one record). */
  readOldest(maxReadings: number, maxBytes: number): QueueRecord[] {
    const records: QueueRecord[] = [];
    let readings = 0;
    let bytes = 0;
    for (const [id, receivedMs, count, payload] of this.#selectOldest.iterate()) {
      records.push({ id, receivedMs, readings: count, payload });
      readings += count;
      bytes += payload.length;
      if (readings >= maxReadings || bytes >= maxBytes) break;
    }
    return records;
  }

  /**
   * Removes the given oldest records (QuestDB holds their readings), storing the readings QuestDB
   * refused as dead letters in the transaction that removes their record.
   */
  complete(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = []): Completion {
    const failedMs = Date.now();
    for (let start = 0; start < records.length; start += DELETE_CHUNK) {
      const chunk = records.slice(start, start + DELETE_CHUNK);
      const first = chunk[0]!.id;
      const last = chunk[chunk.length - 1]!.id;
      this.#removeChunk(last, deadLetters.filter((d) => d.recordId >= first && d.recordId <= last), failedMs);
    }
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered: deadLetters.length };
  }

  close(): void {
    this.#db.close();
  }
}
