import type Database from 'better-sqlite3';
import {
  dropSegment,
  listSegments,
  openQueueFile,
  readProgress,
  segmentRecordsAfter,
  type Durability,
  type Progress,
} from './queue-file.js';

/** One request's readings, as stored. */
export interface QueueRecord {
  segment: number;
  id: number;
  receivedMs: number;
  readings: number;
  bytes: number;
  payload: string;
}

export interface DeadLetterInput {
  receivedMs: number;
  reason: string;
  /** The reading as a record line (see record-codec), or a whole corrupt record. */
  line: string;
}

/** Records taken off the queue in one `complete`, for the ingest side's accounting and the logs. */
export interface Completion {
  records: number;
  readings: number;
  deadLettered: number;
}

/**
 * The flusher's side of the queue, on its own connection: reads the records after the progress
 * mark, moves the mark past what QuestDB confirmed (with the readings it refused moved to the dead
 * letters, in the same transaction), and drops the segments the mark has left behind.
 */
export class QueueReader {
  readonly #db: Database.Database;
  readonly #advance: (to: Progress, records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[], failedMs: number) => void;
  #progress: Progress;

  constructor(dataDir: string, durability: Durability) {
    this.#db = openQueueFile(dataDir, durability, { create: false });
    const db = this.#db;
    this.#progress = readProgress(db);
    const setProgress = db.prepare<[number, number]>('UPDATE progress SET segment = ?, last_id = ? WHERE id = 1');
    const countRemoved = db.prepare<[number, number, number]>(
      'UPDATE ledger SET removed_records = removed_records + ?, removed_readings = removed_readings + ?, removed_bytes = removed_bytes + ? WHERE id = 1',
    );
    const insertDeadLetter = db.prepare<[number, number, string, string]>(
      'INSERT INTO dead_letters (received_ms, failed_ms, reason, line) VALUES (?, ?, ?, ?)',
    );
    this.#advance = db.transaction(
      (to: Progress, records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[], failedMs: number) => {
        for (const d of deadLetters) insertDeadLetter.run(d.receivedMs, failedMs, d.reason, d.line);
        setProgress.run(to.segment, to.lastId);
        let readings = 0;
        let bytes = 0;
        for (const r of records) {
          readings += r.readings;
          bytes += r.bytes;
        }
        countRemoved.run(records.length, readings, bytes);
      },
    );
  }

  /**
   * The oldest records after the mark (or after `from`, to read ahead), in order, until
   * `maxReadings` or `maxBytes` is reached (at least one record).
   */
  readOldest(maxReadings: number, maxBytes: number, from: Progress = this.#progress): QueueRecord[] {
    const records: QueueRecord[] = [];
    let readings = 0;
    let bytes = 0;
    for (const segment of listSegments(this.#db)) {
      if (segment < from.segment) continue;
      const after = segment === from.segment ? from.lastId : 0;
      for (const [id, receivedMs, count, size, payload] of segmentRecordsAfter(this.#db, segment).iterate(after)) {
        records.push({ segment, id, receivedMs, readings: count, bytes: size, payload });
        readings += count;
        bytes += size;
        if (readings >= maxReadings || bytes >= maxBytes) return records;
      }
    }
    return records;
  }

  /**
   * Moves the mark past the given records (QuestDB holds their readings), keeping the readings
   * QuestDB refused as dead letters, then drops the segments left wholly behind the mark.
   */
  complete(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = []): Completion {
    const last = records.at(-1);
    if (last === undefined) return { records: 0, readings: 0, deadLettered: 0 };
    const to = { segment: last.segment, lastId: last.id };
    this.#advance(to, records, deadLetters, Date.now());
    this.#progress = to;
    for (const segment of listSegments(this.#db)) {
      if (segment < to.segment) dropSegment(this.#db, segment);
    }
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered: deadLetters.length };
  }

  close(): void {
    this.#db.close();
  }
}
