import { closeSync, fsyncSync, openSync } from 'node:fs';
import type Database from 'better-sqlite3';

/**
 * The queue's checkpoints, which copy its log (WAL) into the queue file.
 *
 * SQLite's own would lose answered readings on a disk whose fsync fails. A checkpoint that finds a
 * reader on an older snapshot copies only part of the log and records that part as copied without
 * an fsync of the file: the next checkpoint's fsync covers it. When that fsync fails, the kernel
 * keeps the unwritten pages readable but no longer writes them ("fsyncgate"), and SQLite records
 * nothing of the failed checkpoint. The one after starts past the partial copy, never writes those
 * pages again, and lets the log start over: a power cut then leaves a malformed file. An automatic
 * checkpoint's failure is not reported at all.
 *
 * So every connection turns automatic checkpoints off (queue-file.ts) and checkpoints here, one at
 * a time in the process (a lock shared with the delivery thread), each followed by an fsync of the
 * file: what a checkpoint recorded as copied is then on the disk before another can start. When
 * SQLite's own fsync fails, it recorded nothing, and the next checkpoint copies those pages again.
 * When the fsync here fails, SQLite has recorded pages the disk dropped: no checkpoint may run
 * again in this process, the log keeps every commit, and the next start's recovery copies all of
 * it again. Closing the file would checkpoint as well, so the gateway exits without closing it
 * (gateway.ts), as PostgreSQL stops on a failed fsync.
 */

/** SQLite's default: a checkpoint once the log holds 1,000 pages. */
const CHECKPOINT_PAGES = 1000;
/**
 * Pages a commit adds to the log besides its records' bytes. An estimate: measured on the queue's
 * 1 KiB pages, a single reading's commit adds 1.2 pages, a batch of 10 (0.4 KB) 2.5, of 100 (1.8
 * to 4 KB) 5 to 7, of 1,000 (41 KB) 44. The log is checkpointed at 1,000 to 2,000 pages.
 */
const PAGES_PER_COMMIT = 1;
/** How long a checkpoint that must run (truncating the log) waits for another thread's. */
const LOCK_WAIT_MS = 1000;
/** The shared state's slots: set once a checkpoint's pages were lost; held while one runs. */
const LOST = 0;
const LOCK = 1;

export type CheckpointMode = 'PASSIVE' | 'TRUNCATE';

export interface CheckpointResult {
  /** 1 when a reader, a writer or another checkpoint kept this one from copying, or truncating, all of the log. */
  busy: number;
  /** Pages in the log. */
  log: number;
  /** Of those, pages copied into the file. */
  checkpointed: number;
}

/** A checkpoint's pages were dropped by the disk; none may run again until a new process opens the file. */
export class QueueSyncLostError extends Error {
  override name = 'QueueSyncLostError';
  constructor(options?: ErrorOptions) {
    super('a checkpoint could not make the queue file durable; its log keeps every commit for the next start', options);
  }
}

/** What the threads of one process share: the lost flag and the checkpoint lock. */
export function newCheckpointState(): SharedArrayBuffer {
  return new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT);
}

/** Checkpoints one connection's commits, one checkpoint at a time in the process. */
export class Checkpointer {
  readonly #db: Database.Database;
  readonly #state: Int32Array;
  readonly #onLost: (error: QueueSyncLostError) => void;
  readonly #pageSize: number;
  /** The queue file, for the fsync after each checkpoint; open from before the first. */
  #fd: number | undefined;
  /** Pages this connection's commits may have added to the log since its last checkpoint. */
  #pages = 0;

  /** `onLost` is called once, in the thread whose checkpoint's pages were lost. */
  constructor(db: Database.Database, state: SharedArrayBuffer, onLost: (error: QueueSyncLostError) => void) {
    this.#db = db;
    this.#state = new Int32Array(state);
    this.#onLost = onLost;
    this.#pageSize = db.pragma('page_size', { simple: true }) as number;
    this.#fd = openSync(db.name, 'r');
  }

  /** A checkpoint's pages were lost, in this thread or another. */
  get lost(): boolean {
    return Atomics.load(this.#state, LOST) !== 0;
  }

  /**
   * After a commit of about `bytes` of records: a passive checkpoint once the log may hold
   * CHECKPOINT_PAGES, as SQLite's automatic one would. Never throws: the commit stands, and a loss
   * is reported to `onLost`. As SQLite's, a checkpoint that failed (a full disk, its fsync) or
   * found another running is tried again at the next commit, since the log only grows meanwhile;
   * one that readers held to part of the log, after a tenth of the pages.
   */
  afterCommit(bytes: number): void {
    this.#pages += PAGES_PER_COMMIT + bytes / this.#pageSize;
    if (this.#pages >= CHECKPOINT_PAGES) this.#passive();
  }

  /**
   * At open: a passive checkpoint of what an earlier process left in the log, which the count of
   * pages here does not know of; if it cannot complete, the next commit tries again.
   */
  afterOpen(): void {
    this.#pages = CHECKPOINT_PAGES;
    this.#passive();
  }

  #passive(): void {
    try {
      const result = this.run('PASSIVE');
      if (result.busy !== 0 || result.checkpointed < result.log) this.#pages = CHECKPOINT_PAGES * 0.9;
    } catch {
      // A full disk, SQLite's fsync failed, or lost (reported): the count stays, so the next commit tries again.
    }
  }

  /**
   * Checkpoints and fsyncs the file. A passive checkpoint that finds another thread's running
   * answers busy; a truncating one waits for it up to a second. Throws QueueSyncLostError once a
   * checkpoint's pages were lost, or SQLite's error (busy, full, its fsync failed).
   */
  run(mode: CheckpointMode): CheckpointResult {
    if (this.lost) throw new QueueSyncLostError();
    if (!this.#lock(mode === 'PASSIVE' ? 0 : LOCK_WAIT_MS)) return { busy: 1, log: 0, checkpointed: 0 };
    try {
      let result: CheckpointResult;
      try {
        [result] = this.#db.pragma(`wal_checkpoint(${mode})`) as [CheckpointResult];
      } catch (error) {
        // SQLite recorded nothing: the next checkpoint copies these pages again. The kernel reports
        // the failure to every descriptor of the file once; the fsync below must not take it as its own.
        if ((error as { code?: unknown }).code === 'SQLITE_IOERR_FSYNC') {
          try {
            this.#fsync();
          } catch {
            // The same failure, seen here too.
          }
        }
        throw error;
      }
      this.#pages = 0;
      if (result.checkpointed > 0) {
        try {
          this.#fsync();
        } catch (error) {
          const lost = new QueueSyncLostError({ cause: error });
          if (Atomics.compareExchange(this.#state, LOST, 0, 1) === 0) this.#onLost(lost);
          throw lost;
        }
      }
      return result;
    } finally {
      Atomics.store(this.#state, LOCK, 0);
      Atomics.notify(this.#state, LOCK);
    }
  }

  /** Lets go of the file's descriptor (the connection's close). */
  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  #fsync(): void {
    if (this.#fd !== undefined) fsyncSync(this.#fd);
  }

  /** Takes the process's checkpoint lock, waiting up to `waitMs` for another thread to let go of it. */
  #lock(waitMs: number): boolean {
    const deadline = performance.now() + waitMs;
    while (Atomics.compareExchange(this.#state, LOCK, 0, 1) !== 0) {
      const left = deadline - performance.now();
      if (left <= 0) return false;
      Atomics.wait(this.#state, LOCK, 1, left);
    }
    return true;
  }
}
