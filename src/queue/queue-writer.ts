import type Database from 'better-sqlite3';
import { QUEUE_FULL_MESSAGE, QueueRefusedError, SYNC_LOST_MESSAGE, RequestAbandonedError, classifyWriteError } from './queue-errors.js';
import { DiskReserve, isDiskFull, releaseReserve } from './disk-reserve.js';
import { commitRows, type QueueRow } from './commit-rows.js';
import { LogSync } from './log-sync.js';
import {
  Checkpointer,
  type CheckpointFiles,
  closeCheckpointFiles,
  newCheckpointState,
  openCheckpointFiles,
  QueueSyncLostError,
} from './checkpoint.js';
import {
  countQueued,
  createSegment,
  dropSegment,
  ledgerReader,
  listSegments,
  newestReceivedMs,
  openQueueFile,
  ownSiteId,
  queuePath,
  readProgress,
  segmentInsert,
  segmentRecordsAfter,
  type Durability,
  type Ledger,
  type Progress,
  type Totals,
} from './queue-file.js';
import {
  compareMarks,
  readSinkMarks,
  registerSinks,
  slowestMark,
  totalsBetween,
  type Registered,
  type SinkRegistration,
} from './sink-marks.js';
import { readAllAhead } from './sink-ahead.js';

export type { Durability } from './queue-file.js';

/**
 * A statement run in the transaction of one append (or of a commit of its own, `QueueWriter.write`):
 * state that must become durable with the readings beside it, or not at all, such as an MQTT packet
 * id marked received. Prepared once per distinct SQL on the writer's connection; it must not fail
 * (an `INSERT OR REPLACE`, a `DELETE`), as a failure refuses every append of its commit.
 */
export interface SideWrite {
  sql: string;
  params: readonly (string | number | null)[];
}

/**
 * Told once what became of an append (`appendTo`): `error` undefined once it is committed (and in
 * power-loss mode synced), else why it was refused (QueueRefusedError).
 */
export interface AppendListener {
  appended(error: Error | undefined): void;
}

/** The listener of a promise `append` and `write` return. */
class PromisedAppend implements AppendListener {
  constructor(
    readonly resolve: () => void,
    readonly reject: (error: Error) => void,
  ) {}

  appended(error: Error | undefined): void {
    if (error === undefined) this.resolve();
    else this.reject(error);
  }
}

export interface QueueOptions {
  dataDir: string;
  durability: Durability;
  /** Bound of queued payload bytes; appends beyond it are refused, nothing queued is dropped. */
  maxBytes: number;
  /** The sinks the queue feeds; by default the local QuestDB alone. */
  sinks?: readonly SinkRegistration[];
  /**
   * This gateway's site (`SITE_ID`): its own readings are queued with the name they were answered
   * under, so a rename applies to what is answered after it. Unset: they are queued without a
   * name, and each sink gives them its own site's.
   */
  site?: string;
  /** Keep a reserve on the file system for a full disk (disk-reserve.ts): the gateway does. */
  diskReserve?: boolean;
  /**
   * How long the oldest waiting append waits for others to share its commit (`COMMIT_WINDOW_MS`);
   * 0, the default, commits after one turn of the event loop.
   */
  commitWindowMs?: number;
  /**
   * Called once a checkpoint's pages were lost (checkpoint.ts), in this thread or, through
   * `checkpointFailedElsewhere`, another: the process must end without closing the file. By
   * default the queue only refuses appends from then on.
   */
  onSyncLost?: (error: QueueSyncLostError) => void;
}

/** A sink's share of the queue: what it has still to deliver. */
export interface SinkBacklog {
  readings: number;
  /** When the oldest reading it has not delivered was received. */
  oldestReceivedMs: number | undefined;
}

export interface QueueStats extends Totals {
  /** Transactions that committed appends since open; appends per commit shows group commit at work. */
  commits: number;
  maxBytes: number;
}

/** A new segment starts after this many records or bytes, so a finished one can be dropped soon. */
const SEGMENT_MAX_RECORDS = 16_384;
const SEGMENT_MAX_BYTES = 8 * 1024 * 1024;
/**
 * A full queue takes readings again once it is below this share of its bound: so ingest, /readyz
 * and the health rows do not flip with every small delivery while a sink holds the queue at its
 * bound, and the room made is worth a device's retry.
 */
const RESUME_FILL = 0.95;
/** Pages one compaction returns to the file system at most, so a housekeeping run stays short. */
const COMPACT_MAX_PAGES = 16_384;

/** The connection a request came on (a socket): once its client closed it, nobody waits for the answer. */
export interface RequestConnection {
  readonly destroyed: boolean;
  /** The client sent its end (FIN); Node's HTTP server gives up the connection's requests then too. */
  readonly readableEnded: boolean;
}

const isClosed = (connection: RequestConnection | undefined): boolean =>
  connection !== undefined && (connection.destroyed || connection.readableEnded);

interface PendingAppend extends QueueRow {
  /** Committed with the append's record. */
  side: SideWrite | undefined;
  /** A commit of `side` alone (`write`): no record. */
  sideOnly: boolean;
  connection: RequestConnection | undefined;
  /** The turn of the event loop it was appended in. */
  turn: number;
  /** When it was appended (performance.now()), for the commit window. */
  atMs: number;
  listener: AppendListener;
}

/**
 * The ingest side of the SQLite write-ahead queue. Appends made while the event loop is busy are
 * committed together in one transaction (group commit), and each append's promise settles only
 * after that commit is durable: committed, and in power-loss mode synced too, off the event loop
 * (log-sync.ts). Each sink reads records and moves its progress mark through the other half, QueueReader, on its own connection.
 */
export class QueueWriter {
  readonly path: string;
  readonly dataDir: string;
  readonly durability: Durability;
  readonly maxBytes: number;
  /** Sinks added to and removed from the queue at this open. */
  readonly registered: Registered;
  /** When the newest record in the file at open was received (epoch ms): where receive times resume. */
  readonly newestReceivedMs: number | undefined;
  /** The disk reserve was there or could be made at open (false: the file system was too full). */
  readonly reserveReady: boolean;
  readonly #db: Database.Database;
  /** Per sink: the readings after its mark at open. */
  readonly #sinkBacklogAtOpen = new Map<string, number>();
  readonly #readLedger: () => Ledger;
  /** The sums over the queue when it was opened, and the ledger then. */
  readonly #base: Totals;
  readonly #ledgerAtOpen: Ledger;
  /** What this thread appended since opening. */
  readonly #appended: Totals = { records: 0, readings: 0, bytes: 0 };
  readonly #insertMany: (rows: QueueRow[], sides: readonly SideWrite[] | undefined) => void;
  /** Side writes' statements by their SQL: a few, as their callers are few. */
  readonly #sideStatements = new Map<string, Database.Statement>();
  /** This gateway's site, and its id in the file's `own_sites` (null without a site). */
  readonly #site: string | undefined;
  readonly #siteId: number | null;
  readonly #deadLetterCount: Database.Statement<[], { count: number }>;
  #pending: PendingAppend[] = [];
  /** In power-loss mode: syncs ingest's commits off the event loop (log-sync.ts). */
  readonly #logSync: LogSync | undefined;
  /** Appends committed and not yet answered: they wait for the log sync that runs. */
  #syncing: PendingAppend[] = [];
  readonly #commitWindowMs: number;
  #windowTimer: NodeJS.Timeout | undefined;
  /** Turns of the event loop counted while appends wait (a check-phase callback each). */
  #turn = 0;
  #ticking = false;
  /** The segment appends go to, its insert statement, and how full it is. */
  #segment: number;
  #insert: ReturnType<typeof segmentInsert>;
  #segmentRecords = 0;
  #segmentBytes = 0;
  /** Totals as last computed; the sinks only ever lower them, so they err on the full side. */
  #totals: Totals;
  /** Bytes of appends waiting for their commit. */
  #reserved = 0;
  #commits = 0;
  /** Set when an append was refused for size; cleared once the sinks have made room (below RESUME_FILL). */
  #full = false;
  #closed = false;
  #lastWriteFailureMs: number | undefined;
  /** Room kept on the file system for the delivery thread to record deliveries on a full disk. */
  readonly #diskReserve: DiskReserve;
  /** Shared with the delivery thread's connections: one checkpoint at a time, and a loss stops theirs too. */
  readonly checkpointState = newCheckpointState();
  /** The queue file's descriptors the checkpoints use, lent to the delivery thread (checkpoint.ts). */
  readonly checkpointFiles: CheckpointFiles;
  readonly #checkpointer: Checkpointer;
  readonly #onSyncLost: (error: QueueSyncLostError) => void;
  /** A commit failed for want of disk space, and none has succeeded since. */
  #diskFull = false;
  #diskFullListener: ((full: boolean) => void) | undefined;
  #committedListener: (() => void) | undefined;
  /** When room was last made for the reserve while the disk is full (monotonic ms). */
  #roomMadeAt = Number.NEGATIVE_INFINITY;

  private constructor(options: QueueOptions) {
    this.dataDir = options.dataDir;
    this.path = queuePath(options.dataDir);
    this.durability = options.durability;
    this.maxBytes = options.maxBytes;
    this.#commitWindowMs = options.commitWindowMs ?? 0;
    const syncedHere = options.durability === 'power-loss';
    this.#db = openQueueFile(options.dataDir, options.durability, { create: true, syncedElsewhere: syncedHere });
    const db = this.#db;
    this.#logSync = syncedHere ? new LogSync(this.path) : undefined;
    this.#onSyncLost = options.onSyncLost ?? (() => undefined);
    this.checkpointFiles = openCheckpointFiles(this.path);
    this.#checkpointer = new Checkpointer(db, this.checkpointState, this.checkpointFiles, this.#onSyncLost);
    this.registered = registerSinks(db, options.sinks ?? [{ name: 'questdb', backfill: true }]);
    const end: Progress = { segment: Number.MAX_SAFE_INTEGER, lastId: Number.MAX_SAFE_INTEGER };
    const ahead = readAllAhead(db);
    for (const [name, mark] of readSinkMarks(db)) {
      const range = ahead.get(name);
      // Records a current-first sink delivered ahead of its mark are not its backlog.
      const delivered = range === undefined ? 0 : totalsBetween(db, range.from, range.to).readings;
      this.#sinkBacklogAtOpen.set(name, totalsBetween(db, mark, end).readings - delivered);
    }
    this.#readLedger = ledgerReader(db);
    this.#segment = listSegments(db).at(-1)!;
    this.#insert = segmentInsert(db, this.#segment);
    for (const [, , , bytes] of segmentRecordsAfter(db, this.#segment).iterate(0)) {
      this.#segmentRecords += 1;
      this.#segmentBytes += bytes;
    }
    this.#site = options.site;
    this.#siteId = options.site === undefined ? null : this.#ownSiteId(options.dataDir, options.site);
    this.#insertMany = db.transaction((rows: QueueRow[], sides: readonly SideWrite[] | undefined) => {
      const insert = this.#insert;
      const ownSite = this.#siteId;
      for (const row of rows)
        insert.run(row.receivedMs, row.readings, row.bytes, row.payload, row.site, null, row.site === null ? ownSite : null);
      if (sides !== undefined) for (const side of sides) this.#sideStatement(side.sql).run(...side.params);
    });
    this.#deadLetterCount = db.prepare('SELECT COUNT(*) AS count FROM dead_letters');
    this.#ledgerAtOpen = this.#readLedger();
    this.#base = countQueued(db);
    this.newestReceivedMs = newestReceivedMs(db);
    this.#diskReserve = new DiskReserve(options.dataDir, options.diskReserve === true);
    this.reserveReady = this.#diskReserve.ensure();
    this.#totals = { ...this.#base };
  }

  static open(options: QueueOptions): QueueWriter {
    return new QueueWriter(options);
  }

  /** The site's id in the file; a new name on a full disk takes the disk reserve's room (disk-reserve.ts). */
  #ownSiteId(dataDir: string, site: string): number {
    try {
      return ownSiteId(this.#db, site);
    } catch (error) {
      if (!isDiskFull(error) || !releaseReserve(dataDir)) throw error;
      return ownSiteId(this.#db, site);
    }
  }

  /**
   * Queues one request's readings, from `site` (undefined or this gateway's name: its own, queued
   * under the name it has now); resolves once they are committed, rejects with QueueRefusedError,
   * or with RequestAbandonedError when `connection` was closed by its client before the commit.
   */
  append(
    payload: string,
    readings: number,
    receivedMs: number,
    connection?: RequestConnection,
    site?: string,
    side?: SideWrite,
  ): Promise<void> {
    const bytes = Buffer.byteLength(payload);
    const refusal = this.#admit(bytes);
    if (refusal !== undefined) return Promise.reject(refusal);
    return new Promise<void>((resolve, reject) => {
      this.#enqueue(payload, readings, bytes, receivedMs, connection, site, side, new PromisedAppend(resolve, reject));
    });
  }

  /**
   * As `append`, telling `listener` instead of settling a promise: for a caller that keeps
   * thousands of appends in flight (an MQTT session's publishes), no promise and no promise jobs
   * an append. A refusal known at once is told before this returns.
   */
  appendTo(listener: AppendListener, payload: string, readings: number, receivedMs: number, site?: string, side?: SideWrite): void {
    const bytes = Buffer.byteLength(payload);
    const refusal = this.#admit(bytes);
    if (refusal !== undefined) listener.appended(refusal);
    else this.#enqueue(payload, readings, bytes, receivedMs, undefined, site, side, listener);
  }

  /** Why an append of `bytes` is refused now, or undefined: then its bytes are reserved until its commit. */
  #admit(bytes: number): QueueRefusedError | undefined {
    if (this.#closed) return new QueueRefusedError('closed', 'The gateway is stopping; retry shortly');
    if (this.#checkpointer.lost) return new QueueRefusedError('io_error', SYNC_LOST_MESSAGE);
    if (this.#totals.bytes + this.#reserved + bytes > this.maxBytes) {
      this.#full = true;
      return new QueueRefusedError('full', QUEUE_FULL_MESSAGE);
    }
    // On a full disk nothing is tried until there is room again: a failing commit could take the
    // room the delivery thread frees for itself.
    if (this.#diskFull && !this.#roomToWrite()) return classifyWriteError({ code: 'SQLITE_FULL' });
    if (this.#diskFull) this.#setDiskFull(false);
    this.#reserved += bytes;
    return undefined;
  }

  #enqueue(
    payload: string,
    readings: number,
    bytes: number,
    receivedMs: number,
    connection: RequestConnection | undefined,
    site: string | undefined,
    side: SideWrite | undefined,
    listener: AppendListener,
  ): void {
    this.#pending.push({
      payload,
      readings,
      bytes,
      receivedMs,
      site: site === undefined || site === this.#site ? null : site,
      side,
      sideOnly: false,
      connection,
      turn: this.#turn,
      atMs: this.#commitWindowMs === 0 ? 0 : performance.now(),
      listener,
    });
    this.#kick();
  }

  /**
   * Commits `side` alone, in the next group commit beside the appends waiting for it; resolves once
   * it is as durable as an append (synced too in power-loss mode). Refused as appends are when the
   * queue is closed, its sync lost or the disk full; not refused for a full queue, as it adds no record.
   */
  write(side: SideWrite): Promise<void> {
    if (this.#closed) return Promise.reject(new QueueRefusedError('closed', 'The gateway is stopping; retry shortly'));
    if (this.#checkpointer.lost) return Promise.reject(new QueueRefusedError('io_error', SYNC_LOST_MESSAGE));
    if (this.#diskFull && !this.#roomToWrite()) return Promise.reject(classifyWriteError({ code: 'SQLITE_FULL' }));
    return new Promise<void>((resolve, reject) => {
      this.#pending.push({
        payload: '',
        readings: 0,
        bytes: 0,
        receivedMs: 0,
        site: null,
        side,
        sideOnly: true,
        connection: undefined,
        turn: this.#turn,
        atMs: this.#commitWindowMs === 0 ? 0 : performance.now(),
        listener: new PromisedAppend(resolve, reject),
      });
      this.#kick();
    });
  }

  /** Runs `sql` on the writer's connection now, outside any commit: for a side write's table (`CREATE TABLE IF NOT EXISTS`) and its reads. */
  run<R = unknown>(sql: string, ...params: (string | number | null)[]): R[] {
    const statement = this.#sideStatement(sql);
    if (statement.reader) return statement.all(...params) as R[];
    statement.run(...params);
    return [];
  }

  #sideStatement(sql: string): Database.Statement {
    let statement = this.#sideStatements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#sideStatements.set(sql, statement);
    }
    return statement;
  }

  /** Turns the event loop until what is pending is committed; ticks run in its check phase only. */
  #kick(): void {
    if (this.#ticking) return;
    this.#ticking = true;
    setImmediate(this.#tick);
  }

  /**
   * Once a turn of the event loop: commits the appends made before the last turn. Each waits one
   * whole turn, whose poll reads the end of a connection whose request was read in the turn before
   * (a read stops at a partial buffer, before the EOF behind it), so a request its client gave up
   * on meanwhile is not committed. Everything appended in between goes in the same commit.
   * With a commit window the commit also waits until the oldest append has waited the window
   * (on a timer, not turning the loop), so appends that come meanwhile share its write and fsync.
   * While the log sync of the commit before runs, appends that have waited their turn wait for its
   * end (without turning the loop) and then share one commit and one sync.
   */
  readonly #tick = (): void => {
    const oldest = this.#pending[0];
    // Nothing waits once close() has committed it all.
    if (oldest === undefined) {
      this.#ticking = false;
      return;
    }
    if (this.#commitWindowMs > 0) {
      const wait = oldest.atMs + this.#commitWindowMs - performance.now();
      if (wait > 0) {
        this.#windowTimer = setTimeout(this.#windowEnded, wait);
        return;
      }
    }
    this.#turn += 1;
    if (this.#logSync?.running !== true) {
      let due = 0;
      while (due < this.#pending.length && this.#pending[due]!.turn <= this.#turn - 2) due += 1;
      if (due > 0) this.#commit(this.#pending.splice(0, due));
    }
    const newest = this.#pending.at(-1);
    if (newest !== undefined && newest.turn > this.#turn - 2) setImmediate(this.#tick);
    else this.#ticking = false;
  };

  readonly #windowEnded = (): void => {
    this.#windowTimer = undefined;
    setImmediate(this.#tick);
  };

  #commit(appends: PendingAppend[]): void {
    let batch = appends;
    for (const item of batch) this.#reserved -= item.bytes;
    if (this.#checkpointer.lost) {
      const refusal = new QueueRefusedError('io_error', SYNC_LOST_MESSAGE);
      for (const item of batch) item.listener.appended(refusal);
      return;
    }
    if (batch.some((item) => isClosed(item.connection))) batch = this.#withoutAbandoned(batch);
    if (batch.length === 0) return;
    if (!this.#diskFull && !this.#roomForCommit(batch.reduce((sum, item) => sum + item.bytes, 0))) this.#setDiskFull(true);
    if (this.#diskFull) {
      const refusal = classifyWriteError({ code: 'SQLITE_FULL' });
      for (const item of batch) item.listener.appended(refusal);
      return;
    }
    // Only commits that carry side writes pay for sorting them out.
    let sides: SideWrite[] | undefined;
    let records: PendingAppend[] = batch;
    if (batch.some((item) => item.side !== undefined)) {
      sides = [];
      records = [];
      for (const item of batch) {
        if (item.side !== undefined) sides.push(item.side);
        if (!item.sideOnly) records.push(item);
      }
    }
    const rows = commitRows(records);
    try {
      this.#insertMany(rows, sides);
    } catch (error) {
      const refusal = classifyWriteError(error);
      if (isDiskFull(error)) this.#setDiskFull(true);
      else this.#lastWriteFailureMs = Date.now();
      for (const item of batch) item.listener.appended(refusal);
      return;
    }
    this.#lastWriteFailureMs = undefined;
    if (this.#diskFull) this.#setDiskFull(false);
    this.#commits += 1;
    for (const row of rows) {
      this.#segmentRecords += 1;
      this.#segmentBytes += row.bytes;
      this.#appended.records += 1;
      this.#appended.readings += row.readings;
      this.#appended.bytes += row.bytes;
      this.#totals.records += 1;
      this.#totals.readings += row.readings;
      this.#totals.bytes += row.bytes;
    }
    if (this.#logSync === undefined) this.#settle(batch, null);
    else {
      for (const item of batch) this.#syncing.push(item);
      if (!this.#logSync.running) this.#logSync.start(this.#synced);
    }
    if (this.#segmentRecords >= SEGMENT_MAX_RECORDS || this.#segmentBytes >= SEGMENT_MAX_BYTES) this.#startSegment();
  }

  /** The log sync ended: answers the appends it made durable, and lets the next commit go. */
  readonly #synced = (error: Error | null): void => {
    const batch = this.#syncing;
    this.#syncing = [];
    // Empty when close() synced and answered them already.
    if (batch.length > 0) this.#settle(batch, error);
    if (this.#pending.length > 0 && !this.#closed) this.#kick();
  };

  /** Syncs the log on this thread and answers what waited for it (at close). */
  #syncNow(): void {
    if (this.#logSync === undefined || this.#syncing.length === 0) return;
    const batch = this.#syncing;
    this.#syncing = [];
    let error: Error | null = null;
    try {
      this.#logSync.now();
    } catch (failure) {
      error = failure as Error;
    }
    this.#settle(batch, error);
  }

  /**
   * Answers committed appends once durable. After a failed log sync none is: the disk may have
   * dropped their pages, and any after them would sit behind that hole in the log, so the queue
   * stops as after a lost checkpoint, and the next start rewrites the whole log (queue-file.ts).
   */
  #settle(batch: PendingAppend[], error: Error | null): void {
    if (error !== null) {
      this.#checkpointer.lose(error);
      const refusal = new QueueRefusedError('io_error', SYNC_LOST_MESSAGE);
      for (const item of batch) item.listener.appended(refusal);
      return;
    }
    for (const item of batch) item.listener.appended(undefined);
    this.#committedListener?.();
    // After the sync: a checkpoint's own sync of the log then has none of these pages left to write.
    this.#checkpointer.afterCommit();
  }

  /** Refuses the appends whose client went away while they waited: they are not committed. */
  #withoutAbandoned(batch: PendingAppend[]): PendingAppend[] {
    const kept: PendingAppend[] = [];
    for (const item of batch) {
      if (isClosed(item.connection)) item.listener.appended(new RequestAbandonedError());
      else kept.push(item);
    }
    return kept;
  }

  /** Seals the current segment (dropped once every sink has passed it) and appends to a new one. */
  #startSegment(): void {
    try {
      createSegment(this.#db, this.#segment + 1);
    } catch {
      // A full disk: keep appending to the current segment; the next commit tries again.
      return;
    }
    this.#segment += 1;
    this.#insert = segmentInsert(this.#db, this.#segment);
    this.#segmentRecords = 0;
    this.#segmentBytes = 0;
  }

  /** Takes in what the sinks moved the common mark past and the operator re-queued since the last call. */
  refresh(): void {
    if (this.#closed) return;
    const ledger = this.#readLedger();
    const total = (key: keyof Totals): number =>
      this.#base[key] +
      this.#appended[key] +
      (ledger.added[key] - this.#ledgerAtOpen.added[key]) -
      (ledger.removed[key] - this.#ledgerAtOpen.removed[key]);
    this.#totals = { records: total('records'), readings: total('readings'), bytes: total('bytes') };
    if (this.#totals.bytes + this.#reserved < this.maxBytes * RESUME_FILL) this.#full = false;
    if (this.#diskFull) this.#roomToWrite();
  }

  /**
   * Whether a commit of `bytes` leaves the margin free. When it would not, the pages the log holds
   * go into the queue file first, while the margin is still free, and the commit is refused only
   * when that did not make room: a later truncation then has nothing to give back, so ingest does
   * not resume until the sinks hand segments back or space returns.
   */
  #roomForCommit(bytes: number): boolean {
    if (this.#diskReserve.roomFor(bytes)) return true;
    this.#roomMadeAt = performance.now();
    try {
      this.#makeRoom();
      return this.#diskReserve.ensure() && this.#diskReserve.roomFor(bytes);
    } catch {
      // A checkpoint or compaction that could not write: refused, and the next look tries again.
      return false;
    }
  }

  /**
   * On a full disk: whether ingest may write again. Only once the reserve is there (made again after
   * the delivery thread used it) and the file system has room for the reserve and as much again
   * besides (disk-reserve.ts). Until then, room is made at most once a second (`#makeRoom`); the
   * rest is a statfs.
   */
  #roomToWrite(): boolean {
    try {
      if (this.#diskReserve.present && this.#diskReserve.roomToResume()) return true;
      const now = performance.now();
      if (now - this.#roomMadeAt < 1000) return false;
      this.#roomMadeAt = now;
      this.#makeRoom();
      return this.#diskReserve.ensure() && this.#diskReserve.roomToResume();
    } catch {
      // Still full (a checkpoint or compaction could not write): the next look tries again.
      return false;
    }
  }

  /**
   * Hands what the sinks are done with back to the file system, so the reserve can be made again:
   * the log is checkpointed and truncated; the current segment, once every sink passed all of it,
   * is closed for a new one and dropped (ingest, refused meanwhile, appends nothing that would let
   * the sinks move into a newer one); free pages go back to the file system. A step that finds the
   * disk full uses the reserve, as the delivery thread does.
   */
  #makeRoom(): void {
    const last = this.#db.prepare<[], number | null>(`SELECT MAX(id) FROM segment_${this.#segment}`).pluck().get() ?? 0;
    const drained = compareMarks(slowestMark(this.#db), { segment: this.#segment, lastId: last }) >= 0;
    // The reserve is the delivery thread's as long as it has deliveries to record.
    const step = (write: () => void): void => {
      try {
        write();
      } catch (error) {
        if (!isDiskFull(error) || !drained || !releaseReserve(this.dataDir)) throw error;
        write();
      }
    };
    step(() => this.#truncateLog());
    if (last > 0 && drained) {
      const finished = this.#segment;
      this.#startSegment();
      if (this.#segment > finished) step(() => dropSegment(this.#db, finished));
    }
    // A little at a time: each round's moved pages go into the file, which then ends earlier.
    for (let round = 0; round < 16 && this.compact() > 0; round++) step(() => this.#truncateLog());
  }

  /** Checkpoints the log and truncates it; waits for readers only briefly, as this is the ingest thread. */
  #truncateLog(): void {
    this.#db.pragma('busy_timeout = 100');
    try {
      this.#checkpointer.run('TRUNCATE');
    } finally {
      this.#db.pragma('busy_timeout = 10000');
    }
  }

  /**
   * Tells `listener` when ingest starts refusing for a full disk (true) and when it writes again
   * (false): the delivery thread then lets go of what its sinks keep for their replay windows.
   */
  onDiskFull(listener: (full: boolean) => void): void {
    this.#diskFullListener = listener;
  }

  /**
   * Tells `listener` once a commit's appends are answered (in power-loss mode, after their log
   * sync): once a commit, however many appends it carried, where telling each append's caller was a
   * wake-up of the delivery thread per request or message.
   */
  onCommitted(listener: () => void): void {
    this.#committedListener = listener;
  }

  #setDiskFull(full: boolean): void {
    this.#diskFull = full;
    this.#diskFullListener?.(full);
  }

  /** A commit failed for want of disk space and there is no room yet: ingest refuses, readiness says so. */
  isDiskFull(): boolean {
    return this.#diskFull && !this.#roomToWrite();
  }

  /** Full: an append was refused for size and no room has been made since. */
  isFull(): boolean {
    return this.#full;
  }

  /**
   * A checkpoint's pages were lost in the delivery thread (its message says why): the shared state
   * already stops every checkpoint; this reports it to `onSyncLost`.
   */
  checkpointFailedElsewhere(why: string): void {
    this.#onSyncLost(new QueueSyncLostError({ cause: new Error(why) }));
  }

  /** Writable: open, not full, not out of disk space, and no other write failed (I/O) in the last few seconds. */
  isWritable(now = Date.now()): boolean {
    return (
      !this.#closed &&
      !this.#checkpointer.lost &&
      !this.#full &&
      !this.isDiskFull() &&
      (this.#lastWriteFailureMs === undefined || now - this.#lastWriteFailureMs > 5000)
    );
  }

  /** The database answers queries: for the systemd watchdog. */
  isHealthy(): boolean {
    if (this.#closed) return false;
    try {
      this.#readLedger();
      return true;
    } catch {
      return false;
    }
  }

  stats(): QueueStats {
    return { ...this.#totals, commits: this.#commits, maxBytes: this.maxBytes };
  }

  /** Readings this thread appended since open: a cheap count of what arrived, for wake-ups. */
  get appendedReadings(): number {
    return this.#appended.readings;
  }

  /** Bytes queued; asked after every request, so without the copy `stats()` makes. */
  get bytes(): number {
    return this.#totals.bytes;
  }

  /** Readings queued; asked after every request, so without the copy `stats()` makes. */
  get readings(): number {
    return this.#totals.readings;
  }

  /** Readings added since open: this thread's appends and what the operator re-queued. */
  addedReadingsSinceOpen(): number {
    if (this.#closed) return this.#appended.readings;
    return this.#appended.readings + this.#readLedger().added.readings - this.#ledgerAtOpen.added.readings;
  }

  /**
   * What a sink has still to deliver, given the readings it took off the queue since open
   * (delivered, dead-lettered or dropped): counted, not scanned, as a backlog may be millions.
   */
  sinkBacklog(sink: string, takenSinceOpen: number): SinkBacklog | undefined {
    const atOpen = this.#sinkBacklogAtOpen.get(sink);
    if (atOpen === undefined || this.#closed) return undefined;
    const mark = readSinkMarks(this.#db).get(sink);
    return {
      readings: Math.max(0, atOpen + this.addedReadingsSinceOpen() - takenSinceOpen),
      oldestReceivedMs: mark === undefined ? undefined : this.#firstReceivedAfter(mark),
    };
  }

  /** When the oldest reading not every sink holds yet was received. */
  oldestReceivedMs(): number | undefined {
    if (this.#closed) return undefined;
    return this.#firstReceivedAfter(readProgress(this.#db));
  }

  #firstReceivedAfter(progress: Progress): number | undefined {
    for (const segment of listSegments(this.#db)) {
      if (segment < progress.segment) continue;
      const first = segmentRecordsAfter(this.#db, segment).get(segment === progress.segment ? progress.lastId : 0);
      if (first !== undefined) return first[1];
    }
    return undefined;
  }

  deadLetterCount(): number {
    return this.#deadLetterCount.get()?.count ?? 0;
  }

  /** Returns free pages to the file system once a backlog has drained; bounded work per call. */
  compact(): number {
    if (this.#closed) return 0;
    const free = this.#db.pragma('freelist_count', { simple: true }) as number;
    // Moving a page writes it to the log first: on a nearly full disk, only as many as half the room takes.
    const pages = Math.min(
      free,
      COMPACT_MAX_PAGES,
      this.#diskReserve.pagesToMove(this.#db.pragma('page_size', { simple: true }) as number),
    );
    if (pages <= 0) return 0;
    try {
      this.#db.pragma(`incremental_vacuum(${pages})`);
    } catch (error) {
      if (isDiskFull(error)) return 0;
      throw error;
    }
    return pages;
  }

  /**
   * Commits what is pending, checkpoints the WAL into the database file and closes it. Returns
   * false when the checkpoint failed (a full disk): the WAL stays and is replayed at the next open.
   * After a loss (checkpoint.ts) the file stays open: closing it would checkpoint.
   */
  close(): boolean {
    if (this.#closed) return true;
    clearTimeout(this.#windowTimer);
    if (this.#pending.length > 0) this.#commit(this.#pending.splice(0));
    this.#syncNow();
    this.#closed = true;
    if (this.#checkpointer.lost) return false;
    try {
      this.#checkpointer.run('TRUNCATE');
      return true;
    } catch {
      return false;
    } finally {
      if (!this.#checkpointer.lost) {
        this.#db.close();
        // After the last connection: closing them releases the process's locks on the files.
        closeCheckpointFiles(this.checkpointFiles);
        this.#logSync?.close();
      }
    }
  }
}
