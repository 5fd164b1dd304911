import type Database from 'better-sqlite3';
import { listSegments, openQueueFile, segmentRecordsAfter, type Durability, type Progress } from './queue-file.js';
import { advanceCommonMark, compareMarks, dropPassedSegments, readSinkMarks, writeSinkMark } from './sink-marks.js';

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

/** Records taken off the queue by one sink in one step, for the status counters and the logs. */
export interface Completion {
  records: number;
  readings: number;
  deadLettered: number;
}

/**
 * One sink's side of the queue, on its own connection: reads the records after the sink's progress
 * mark, moves the mark past what the destination confirmed (with the readings it refused moved to
 * the dead letters under the sink's name, in the same transaction), and moves the common mark when
 * this sink was the slowest, dropping the segments every sink has passed.
 */
export class QueueReader {
  readonly sink: string;
  readonly #db: Database.Database;
  readonly #advance: (to: Progress, deadLetters: readonly DeadLetterInput[], failedMs: number) => Progress;
  #progress: Progress;

  constructor(dataDir: string, durability: Durability, sink: string) {
    this.sink = sink;
    this.#db = openQueueFile(dataDir, durability, { create: false });
    const db = this.#db;
    const mark = readSinkMarks(db).get(sink);
    if (mark === undefined) {
      db.close();
      throw new Error(`the queue has no progress mark for sink "${sink}"; sinks are registered when the queue is opened for writing`);
    }
    this.#progress = mark;
    const insertDeadLetter = db.prepare<[number, number, string, string, string]>(
      'INSERT INTO dead_letters (received_ms, failed_ms, reason, line, sink) VALUES (?, ?, ?, ?, ?)',
    );
    const advance = db.transaction((to: Progress, deadLetters: readonly DeadLetterInput[], failedMs: number): Progress => {
      for (const d of deadLetters) insertDeadLetter.run(d.receivedMs, failedMs, d.reason, d.line, sink);
      writeSinkMark(db, sink, to);
      return advanceCommonMark(db).common;
    });
    // Immediate: two sinks may move their marks at once, and each reads the others' in the transaction.
    this.#advance = (to, deadLetters, failedMs) => advance.immediate(to, deadLetters, failedMs);
  }

  /** This sink's mark: everything up to it was delivered, dead-lettered or dropped. */
  get progress(): Progress {
    return this.#progress;
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
   * Moves the mark past the given records (the destination holds their readings), keeping the
   * readings it refused as dead letters, then drops the segments every sink has passed.
   */
  complete(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = []): Completion {
    const last = records.at(-1);
    if (last === undefined) return { records: 0, readings: 0, deadLettered: 0 };
    // Never backwards: a batch in flight while the sink skipped its oldest readings ends behind the skip.
    const end = { segment: last.segment, lastId: last.id };
    const to = compareMarks(end, this.#progress) > 0 ? end : this.#progress;
    dropPassedSegments(this.#db, this.#advance(to, deadLetters, Date.now()));
    this.#progress = to;
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered: deadLetters.length };
  }

  /**
   * Skips this sink's oldest records, up to `maxBytes` of them but never past `limit` (the slowest
   * sink that must not drop): the `drop_oldest` policy making room in a full queue.
   */
  skipOldest(maxBytes: number, limit: Progress): Completion {
    const skipped: QueueRecord[] = [];
    let bytes = 0;
    for (const segment of listSegments(this.#db)) {
      if (segment < this.#progress.segment || segment > limit.segment) continue;
      const after = segment === this.#progress.segment ? this.#progress.lastId : 0;
      for (const [id, receivedMs, readings, size] of segmentRecordsAfter(this.#db, segment).iterate(after)) {
        if (compareMarks({ segment, lastId: id }, limit) > 0 || bytes >= maxBytes) break;
        skipped.push({ segment, id, receivedMs, readings, bytes: size, payload: '' });
        bytes += size;
      }
      if (bytes >= maxBytes) break;
    }
    return this.complete(skipped);
  }

  /** Every sink's mark, for the delivery thread's choice of what a dropping sink may skip. */
  marks(): Map<string, Progress> {
    return readSinkMarks(this.#db);
  }

  close(): void {
    this.#db.close();
  }
}
