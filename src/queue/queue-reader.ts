import type Database from 'better-sqlite3';
import { DiskReserve, isDiskFull, releaseReserve } from './disk-reserve.js';
import { Checkpointer, type CheckpointFiles, type QueueSyncLostError } from './checkpoint.js';
import {
  openQueueFile,
  ownSiteNames,
  readProgress,
  segmentNames,
  segmentNumbers,
  segmentRecordsAfter,
  type Durability,
  type Progress,
  type SegmentRow,
} from './queue-file.js';
import {
  advanceCommonMark,
  compareMarks,
  dropPassedSegments,
  readKeptMark,
  readSinkMarks,
  writeKeptMark,
  writeSinkMark,
} from './sink-marks.js';
import { createSinkAhead, readAhead, writeAhead, type AheadRange } from './sink-ahead.js';
import { createSinkState, readSinkState, sinkStateWriter, type SinkStateChanges } from './sink-state.js';

/** One request's readings, as stored. */
export interface QueueRecord {
  segment: number;
  id: number;
  receivedMs: number;
  readings: number;
  bytes: number;
  payload: string;
  /**
   * The site the readings come from: another site's, or this gateway's name when it answered them
   * (then `ownSite` is set too). Absent for this gateway's own readings queued without a name (by
   * a release before names were kept): its site as named now.
   */
  site?: string;
  /** For this gateway's own readings: the id of the name they were answered under (`own_sites`). */
  ownSite?: number;
  /** The one sink a re-queued dead letter goes to; absent for every sink. */
  sink?: string;
}

/** Whether a record's readings are this gateway's own (answered here), not another site's it relays. */
export const isOwnRecord = (record: Pick<QueueRecord, 'site' | 'ownSite'>): boolean =>
  record.ownSite !== undefined || record.site === undefined;

export interface DeadLetterInput {
  receivedMs: number;
  reason: string;
  /** The reading as a record line (see record-codec), or a whole corrupt record. */
  line: string;
  /** The site of the record it came from, when another site's. */
  site?: string;
  /** The `ownSite` of the record it came from, when this gateway's own. */
  ownSite?: number;
  /**
   * It came from a dead letter of this sink re-queued for it: refused again, it is a dead letter
   * again, but no new refusal for the counters, which counted it when it was first refused.
   */
  again?: true;
}

/**
 * A stored row as a QueueRecord: the site and sink only when set; a name this gateway answered
 * under is looked up in `ownSites` (its `own_sites`, by id).
 */
export function queueRecord(segment: number, row: SegmentRow, ownSites: ReadonlyMap<number, string>): QueueRecord {
  const [id, receivedMs, readings, bytes, payload, site, sink, ownSite] = row;
  const record: QueueRecord = { segment, id, receivedMs, readings, bytes, payload };
  if (site !== null) record.site = site;
  else if (ownSite !== null) {
    const name = ownSites.get(ownSite);
    if (name !== undefined) record.site = name;
    record.ownSite = ownSite;
  }
  if (sink !== null) record.sink = sink;
  return record;
}

/** Records taken off the queue by one sink in one step, for the status counters and the logs. */
export interface Completion {
  records: number;
  readings: number;
  /** Dead letters made, those refused again after a re-queue left out (`DeadLetterInput.again`). */
  deadLettered: number;
}

/**
 * One sink's side of the queue, on its own connection: reads the records after the sink's progress
 * mark, moves the mark past what the destination confirmed (with the readings it refused moved to
 * the dead letters under the sink's name, in the same transaction), and moves the common mark when
 * this sink was the slowest, dropping the segments every sink has passed.
 *
 * A sink with a replay window also has a kept mark trailing its progress mark: the records between
 * them were delivered but stay in the file, and `replay` reads them again. Reading goes from a
 * cursor, which is the progress mark except while a replay catches up.
 */
export class QueueReader {
  readonly sink: string;
  readonly #dataDir: string;
  /** The gateway's disk reserve (disk-reserve.ts), when it keeps one. */
  readonly #reserve: DiskReserve | undefined;
  readonly #onReserveReleased: () => void;
  readonly #db: Database.Database;
  /** Undefined without the writer's files (a reader made apart from the gateway): it then makes no checkpoints. */
  readonly #checkpointer: Checkpointer | undefined;
  readonly #advance: (
    to: Progress,
    deadLetters: readonly DeadLetterInput[],
    failedMs: number,
    state: SinkStateChanges | undefined,
    ahead: AheadRange | undefined | null,
  ) => Progress;
  readonly #deliverAhead: (range: AheadRange, deadLetters: readonly DeadLetterInput[], failedMs: number) => void;
  /** A current-first sink's records delivered ahead of its mark (sink-ahead.ts). */
  #ahead: AheadRange | undefined;
  readonly #writeState: (changes: SinkStateChanges) => void;
  /** The sink's state (sink-state.ts) as the file held it at open. */
  readonly state: ReadonlyMap<string, string>;
  #progress: Progress;
  #cursor: Progress;
  /** Undefined for a sink without a replay window. */
  #kept: Progress | undefined;
  /** Prepared once: a delivery reads the queue every interval, and preparing cost more than the read. */
  readonly #listSegments: Database.Statement<[], string>;
  readonly #segmentReads = new Map<number, Database.Statement<[number], SegmentRow>>();
  /** The names this gateway had, by id; read again when a record names one not seen yet. */
  #ownSites: Map<number, string>;

  constructor(
    dataDir: string,
    durability: Durability,
    sink: string,
    options: {
      keeps: boolean;
      reserve?: boolean;
      onReserveReleased?: () => void;
      /** The writer's `checkpointState` and `checkpointFiles`, and what to do on a loss (checkpoint.ts). */
      checkpoints?: { state: SharedArrayBuffer; files: CheckpointFiles; onLost: (error: QueueSyncLostError) => void };
    } = { keeps: false },
  ) {
    this.sink = sink;
    this.#dataDir = dataDir;
    this.#reserve = options.reserve === true ? new DiskReserve(dataDir) : undefined;
    this.#onReserveReleased = options.onReserveReleased ?? (() => undefined);
    this.#db = openQueueFile(dataDir, durability, { create: false });
    const db = this.#db;
    this.#listSegments = segmentNames(db);
    this.#ownSites = ownSiteNames(db);
    const mark = readSinkMarks(db).get(sink);
    if (mark === undefined) {
      db.close();
      throw new Error(`the queue has no progress mark for sink "${sink}"; sinks are registered when the queue is opened for writing`);
    }
    this.#progress = mark;
    this.#cursor = mark;
    const checkpoints = options.checkpoints;
    this.#checkpointer = checkpoints && new Checkpointer(db, checkpoints.state, checkpoints.files, checkpoints.onLost);
    // Written only when it changes: a start on a full disk must not fail for want of a page.
    const kept = readKeptMark(db, sink);
    if (options.keeps) {
      this.#kept = kept ?? mark;
      if (kept === undefined) this.#write(() => writeKeptMark(db, sink, mark));
    } else if (kept !== undefined) {
      this.#write(() => db.prepare('DELETE FROM sink_kept WHERE name = ?').run(sink));
    }
    this.#write(() => {
      createSinkState(db);
      createSinkAhead(db);
    });
    this.#ahead = readAhead(db, sink);
    this.state = readSinkState(db, sink);
    const writeState = sinkStateWriter(db, sink);
    this.#writeState = writeState;
    const insertDeadLetter = db.prepare<[number, number, string, string, string, string | null, number | null]>(
      'INSERT INTO dead_letters (received_ms, failed_ms, reason, line, sink, site, own_site) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    const advance = db.transaction(
      (
        to: Progress,
        deadLetters: readonly DeadLetterInput[],
        failedMs: number,
        state: SinkStateChanges | undefined,
        ahead: AheadRange | undefined | null,
      ): Progress => {
        for (const d of deadLetters)
          insertDeadLetter.run(d.receivedMs, failedMs, d.reason, d.line, sink, d.site ?? null, d.ownSite ?? null);
        writeSinkMark(db, sink, to);
        if (state !== undefined) writeState(state);
        // null: the range is passed and gone.
        if (ahead !== undefined) writeAhead(db, sink, ahead ?? undefined);
        return advanceCommonMark(db).common;
      },
    );
    // Immediate: two sinks may move their marks at once, and each reads the others' in the transaction.
    this.#advance = (to, deadLetters, failedMs, state, ahead) => advance.immediate(to, deadLetters, failedMs, state, ahead);
    const deliverAhead = db.transaction((range: AheadRange, deadLetters: readonly DeadLetterInput[], failedMs: number): void => {
      for (const d of deadLetters) insertDeadLetter.run(d.receivedMs, failedMs, d.reason, d.line, sink, d.site ?? null, d.ownSite ?? null);
      writeAhead(db, sink, range);
    });
    this.#deliverAhead = (range, deadLetters, failedMs) => deliverAhead.immediate(range, deadLetters, failedMs);
  }

  /** This sink's mark: everything up to it was delivered, dead-lettered or dropped. */
  get progress(): Progress {
    return this.#progress;
  }

  /** Where the next read starts: the progress mark, or behind it while a replay catches up. */
  get cursor(): Progress {
    return this.#cursor;
  }

  /**
   * The oldest records after the cursor (or after `from`, to read ahead), in order, until
   * `maxReadings` or `maxBytes` is reached (at least one record). Records re-queued for another
   * sink are among them: the sink passes them without delivering them.
   */
  readOldest(maxReadings: number, maxBytes: number, from: Progress = this.#cursor): QueueRecord[] {
    return this.#readAfter(from, maxReadings, maxBytes, this.#ahead?.from);
  }

  /** Records delivered ahead of the mark, when a current-first sink has any. */
  get ahead(): AheadRange | undefined {
    return this.#ahead;
  }

  /** A current-first sink's newest records: those after its range delivered ahead, oldest first. */
  readHead(maxReadings: number, maxBytes: number): QueueRecord[] {
    return this.#ahead === undefined ? [] : this.#readAfter(this.#ahead.to, maxReadings, maxBytes, undefined);
  }

  /**
   * The newest records after the cursor, up to `maxReadings` or `maxBytes` (at least one record),
   * oldest first: the first batch a current-first sink sends after an outage.
   */
  readNewest(maxReadings: number, maxBytes: number): QueueRecord[] {
    const newest: QueueRecord[] = [];
    let readings = 0;
    let bytes = 0;
    const cursor = this.#cursor;
    for (const segment of this.#segments().reverse()) {
      if (segment < cursor.segment) break;
      const after = segment === cursor.segment ? cursor.lastId : 0;
      const rows = this.#db
        .prepare<[number], SegmentRow>(
          `SELECT id, received_ms, readings, bytes, payload, site, sink, own_site FROM segment_${segment} WHERE id > ? ORDER BY id DESC`,
        )
        .raw(true);
      for (const row of rows.iterate(after)) {
        const ownSite = row[7];
        if (ownSite !== null && !this.#ownSites.has(ownSite)) this.#ownSites = ownSiteNames(this.#db);
        const record = queueRecord(segment, row, this.#ownSites);
        newest.push(record);
        readings += record.readings;
        bytes += record.bytes;
        if (readings >= maxReadings || bytes >= maxBytes) return newest.reverse();
      }
    }
    return newest.reverse();
  }

  /**
   * Records the destination holds, delivered ahead of the mark (current first): the range ahead
   * grows to their end. Their readings count as taken now; the mark passes them later, uncounted.
   */
  completeAhead(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = []): Completion {
    const first = records[0];
    const last = records.at(-1);
    if (first === undefined || last === undefined) return { records: 0, readings: 0, deadLettered: 0 };
    const range: AheadRange = {
      from: this.#ahead?.from ?? { segment: first.segment, lastId: first.id - 1 },
      to: { segment: last.segment, lastId: last.id },
    };
    this.#write(() => this.#deliverAhead(range, deadLetters, Date.now()));
    this.#ahead = range;
    this.#checkpointer?.afterCommit();
    let deadLettered = 0;
    for (const letter of deadLetters) if (letter.again !== true) deadLettered += 1;
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered };
  }

  #readAfter(from: Progress, maxReadings: number, maxBytes: number, until: Progress | undefined): QueueRecord[] {
    const records: QueueRecord[] = [];
    let readings = 0;
    let bytes = 0;
    for (const segment of this.#segments()) {
      if (segment < from.segment) continue;
      const after = segment === from.segment ? from.lastId : 0;
      for (const row of this.#recordsAfter(segment).iterate(after)) {
        if (until !== undefined && compareMarks({ segment, lastId: row[0] }, until) > 0) return records;
        const ownSite = row[7];
        if (ownSite !== null && !this.#ownSites.has(ownSite)) this.#ownSites = ownSiteNames(this.#db);
        const record = queueRecord(segment, row, this.#ownSites);
        records.push(record);
        readings += record.readings;
        bytes += record.bytes;
        if (readings >= maxReadings || bytes >= maxBytes) return records;
      }
    }
    return records;
  }

  /**
   * Moves the mark past the given records (the destination holds their readings), keeping the
   * readings it refused as dead letters, then drops the segments every sink has passed. `state`:
   * changes to the sink's state after these records, written with the mark.
   */
  complete(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = [], state?: SinkStateChanges): Completion {
    const last = records.at(-1);
    if (last === undefined) return { records: 0, readings: 0, deadLettered: 0 };
    let end = { segment: last.segment, lastId: last.id };
    // The backlog reached what went ahead of it: the mark passes that too (counted when it went).
    const ahead = this.#ahead;
    const joins = ahead !== undefined && compareMarks(end, ahead.from) >= 0;
    if (joins) end = ahead.to;
    // Never backwards: a batch in flight while the sink skipped its oldest readings ends behind the
    // skip, and a replayed batch behind the mark was delivered (and its refusals kept) before.
    if (compareMarks(end, this.#progress) <= 0) {
      if (compareMarks(end, this.#cursor) > 0) this.#cursor = end;
      return { records: records.length, readings: 0, deadLettered: 0 };
    }
    // When this throws (an fsync failed, a full disk without reserve), the cursor stays: the batch is sent again.
    const common = this.#write(() => this.#advance(end, deadLetters, Date.now(), state, joins ? null : undefined));
    if (joins) this.#ahead = undefined;
    if (compareMarks(end, this.#cursor) > 0) this.#cursor = end;
    this.#progress = end;
    this.#dropPassed(common);
    this.#checkpointer?.afterCommit();
    this.#giveBackLog();
    let deadLettered = 0;
    for (const letter of deadLetters) if (letter.again !== true) deadLettered += 1;
    return { records: records.length, readings: records.reduce((sum, r) => sum + r.readings, 0), deadLettered };
  }

  /** The start of the replay window: everything after it and up to the progress mark is kept. */
  get kept(): Progress | undefined {
    return this.#kept;
  }

  /**
   * Lets go of the kept records up to `to` (never past the progress mark); drops passed segments.
   * `state`: changes to the sink's state after the records up to `to`, written with the kept mark (a
   * sink that keeps records keeps its state as of its kept mark, where a start sends again from).
   */
  keep(to: Progress, state?: SinkStateChanges): void {
    if (this.#kept === undefined) return;
    const mark = compareMarks(to, this.#progress) <= 0 ? to : this.#progress;
    if (compareMarks(mark, this.#kept) <= 0) return;
    this.#write(() =>
      this.#db
        .transaction(() => {
          writeKeptMark(this.#db, this.sink, mark);
          if (state !== undefined) this.#writeState(state);
        })
        .immediate(),
    );
    this.#kept = mark;
    this.#dropPassed(readProgress(this.#db));
    this.#checkpointer?.afterCommit();
  }

  /**
   * A write that must not fail for want of disk space while the queue's own reserve is there: on
   * SQLITE_FULL the reserve is deleted and the write tried once more (disk-reserve.ts). Throws the
   * error when there was no reserve left, or the retry failed too.
   */
  #write<T>(write: () => T): T {
    try {
      return write();
    } catch (error) {
      if (!isDiskFull(error) || !releaseReserve(this.#dataDir)) throw error;
      this.#onReserveReleased();
      return write();
    }
  }

  /**
   * While the disk is short of room (the reserve used up, or less than twice its size free), every
   * completion checkpoints the log and truncates it: the room left must not go on a log that only
   * grows (it starts over only after a checkpoint, which checkpoint.ts would not try before 1,000 pages).
   */
  #giveBackLog(): void {
    const reserve = this.#reserve;
    if (reserve === undefined || (reserve.present && reserve.roomToResume())) return;
    this.#db.pragma('busy_timeout = 1000');
    try {
      this.#checkpointer?.run('TRUNCATE');
    } catch {
      // Busy or still full (or a failed checkpoint, reported): the next completion tries again.
    } finally {
      this.#db.pragma('busy_timeout = 10000');
    }
  }

  /** Drops what every sink passed; on a full disk, a later completion drops it. */
  #dropPassed(common: Progress): void {
    try {
      this.#write(() => dropPassedSegments(this.#db, common));
    } catch (error) {
      if (!isDiskFull(error)) throw error;
    }
  }

  /** The segments in the file, oldest first; forgets the statements of dropped ones. */
  #segments(): number[] {
    const segments = segmentNumbers(this.#listSegments.all());
    if (this.#segmentReads.size > segments.length)
      for (const segment of this.#segmentReads.keys()) if (!segments.includes(segment)) this.#segmentReads.delete(segment);
    return segments;
  }

  #recordsAfter(segment: number): Database.Statement<[number], SegmentRow> {
    let statement = this.#segmentReads.get(segment);
    if (statement === undefined) {
      statement = segmentRecordsAfter(this.#db, segment);
      this.#segmentReads.set(segment, statement);
    }
    return statement;
  }

  /** Reads the kept records again from the next read on; returns the readings to send again. */
  replay(): number {
    if (this.#kept === undefined) return 0;
    this.#cursor = this.#kept;
    let readings = 0;
    for (const segment of this.#segments()) {
      if (segment < this.#kept.segment || segment > this.#progress.segment) continue;
      const after = segment === this.#kept.segment ? this.#kept.lastId : 0;
      for (const [id, , count] of this.#recordsAfter(segment).iterate(after)) {
        if (compareMarks({ segment, lastId: id }, this.#progress) > 0) break;
        readings += count;
      }
    }
    return readings;
  }

  /**
   * Skips this sink's oldest records, up to `maxBytes` of them but never past `limit` (the slowest
   * sink that must not drop): the `drop_oldest` policy making room in a full queue.
   */
  skipOldest(maxBytes: number, limit: Progress): Completion {
    // Never into what a current-first sink delivered ahead: the skip ends where its backlog does.
    if (this.#ahead !== undefined && compareMarks(this.#ahead.from, limit) < 0) limit = this.#ahead.from;
    const skipped: QueueRecord[] = [];
    let bytes = 0;
    for (const segment of this.#segments()) {
      if (segment < this.#progress.segment || segment > limit.segment) continue;
      const after = segment === this.#progress.segment ? this.#progress.lastId : 0;
      for (const [id, receivedMs, readings, size] of this.#recordsAfter(segment).iterate(after)) {
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
