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
 * So every connection turns automatic checkpoints off (queue-file.ts), the queue checkpoints here,
 * and the first I/O error of a checkpoint ends every checkpoint of the file in the process (the
 * state is shared with the delivery thread). The log then keeps every commit; the next start's
 * recovery copies all of it again. Closing the file would checkpoint as well, so the gateway exits
 * without closing it (gateway.ts), as PostgreSQL stops on a failed fsync.
 */

/** SQLite's default: a checkpoint once the log holds 1,000 pages. */
const CHECKPOINT_PAGES = 1000;
/**
 * Pages a commit adds to the log besides its records' bytes. An estimate: measured on the queue's
 * 1 KiB pages, a single reading's commit adds 1.2 pages, a batch of 10 (0.4 KB) 2.5, of 100 (1.8
 * to 4 KB) 5 to 7, of 1,000 (41 KB) 44. The log is checkpointed at 1,000 to 2,000 pages.
 */
const PAGES_PER_COMMIT = 1;

export type CheckpointMode = 'PASSIVE' | 'TRUNCATE';

export interface CheckpointResult {
  /** 1 when a reader or writer kept the checkpoint from copying, or truncating, all of the log. */
  busy: number;
  /** Pages in the log. */
  log: number;
  /** Of those, pages copied into the file. */
  checkpointed: number;
}

/** A checkpoint of the queue file failed; none may run again until the file is reopened by a new process. */
export class QueueSyncLostError extends Error {
  override name = 'QueueSyncLostError';
  constructor(options?: ErrorOptions) {
    super('a checkpoint could not make the queue file durable; its log keeps every commit for the next start', options);
  }
}

/** The flag the threads of one process share: set once a checkpoint of the queue file failed. */
export function newCheckpointState(): SharedArrayBuffer {
  return new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
}

/** Checkpoints one connection's commits, and stops every connection's on the first failure. */
export class Checkpointer {
  readonly #db: Database.Database;
  readonly #lost: Int32Array;
  readonly #onLost: (error: QueueSyncLostError) => void;
  readonly #pageSize: number;
  /** Pages this connection's commits may have added to the log since its last checkpoint. */
  #pages = 0;

  /** `onLost` is called once, in the thread whose checkpoint failed. */
  constructor(db: Database.Database, state: SharedArrayBuffer, onLost: (error: QueueSyncLostError) => void) {
    this.#db = db;
    this.#lost = new Int32Array(state);
    this.#onLost = onLost;
    this.#pageSize = db.pragma('page_size', { simple: true }) as number;
  }

  /** A checkpoint of the file failed, in this thread or another. */
  get lost(): boolean {
    return Atomics.load(this.#lost, 0) !== 0;
  }

  /**
   * After a commit of about `bytes` of records: a passive checkpoint once the log may hold
   * CHECKPOINT_PAGES, as SQLite's automatic one would. Never throws: the commit stands, a busy or
   * full checkpoint is tried again after a later commit, and a failed one is reported to `onLost`.
   */
  afterCommit(bytes: number): void {
    this.#pages += PAGES_PER_COMMIT + bytes / this.#pageSize;
    if (this.#pages < CHECKPOINT_PAGES) return;
    this.#pages = 0;
    try {
      this.run('PASSIVE');
    } catch {
      // Busy, a full disk, or lost (reported): nothing more to do here.
    }
  }

  /** Checkpoints; throws QueueSyncLostError once any checkpoint of the file failed, or SQLite's error (busy, full). */
  run(mode: CheckpointMode): CheckpointResult {
    if (this.lost) throw new QueueSyncLostError();
    try {
      const [result] = this.#db.pragma(`wal_checkpoint(${mode})`) as CheckpointResult[];
      this.#pages = 0;
      return result!;
    } catch (error) {
      if (!isIoError(error)) throw error;
      const lost = new QueueSyncLostError({ cause: error });
      if (Atomics.compareExchange(this.#lost, 0, 0, 1) === 0) this.#onLost(lost);
      throw lost;
    }
  }
}

/** SQLITE_IOERR and its extended codes (SQLITE_IOERR_FSYNC, _WRITE, …); not SQLITE_FULL nor SQLITE_BUSY. */
function isIoError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_IOERR');
}
