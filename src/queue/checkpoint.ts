import { closeSync, fsyncSync, openSync, readSync } from 'node:fs';
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

/** SQLite's default: a checkpoint after a commit that leaves the log at 1,000 pages or more. */
const CHECKPOINT_PAGES = 1000;
/**
 * Where the wal-index header in the `-shm` file keeps the number of the log's last committed
 * page, `mxFrame` (https://www.sqlite.org/walformat.html, 2.1), in the machine's byte order:
 * little-endian on every machine the gateway runs on.
 */
const MX_FRAME_OFFSET = 16;
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

/** Pages of a checkpoint or of a commit were dropped by the disk; no checkpoint may run again until a new process opens the file. */
export class QueueSyncLostError extends Error {
  override name = 'QueueSyncLostError';
  constructor(options?: ErrorOptions) {
    super('an fsync of the queue file or its log failed; the log keeps every commit for the next start', options);
  }
}

/** What the threads of one process share: the lost flag and the checkpoint lock. */
export function newCheckpointState(): SharedArrayBuffer {
  return new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT);
}

/**
 * The queue file and its wal-index, open for the fsync after each checkpoint and for reading the
 * log's length. Opened by the writer and lent to the delivery thread (descriptors are the
 * process's): closing a descriptor of a file releases every POSIX lock the process holds on it,
 * SQLite's included, so they are closed only after the process's last connection.
 */
export interface CheckpointFiles {
  db: number;
  shm: number;
}

/** Opens the files of the queue file `path` (in log mode, so its `-shm` is there). */
export function openCheckpointFiles(path: string): CheckpointFiles {
  return { db: openSync(path, 'r'), shm: openSync(`${path}-shm`, 'r') };
}

/** Closes them, once no connection to the queue file is open in this process. */
export function closeCheckpointFiles(files: CheckpointFiles): void {
  for (const fd of [files.db, files.shm]) {
    try {
      closeSync(fd);
    } catch {
      // Read-only descriptors: a dead disk's EIO at close loses nothing.
    }
  }
}

/** Checkpoints one connection's commits, one checkpoint at a time in the process. */
export class Checkpointer {
  readonly #db: Database.Database;
  readonly #state: Int32Array;
  readonly #onLost: (error: QueueSyncLostError) => void;
  readonly #files: CheckpointFiles;
  readonly #header = Buffer.alloc(4);

  /** `onLost` is called once, in the thread whose checkpoint's pages were lost. */
  constructor(db: Database.Database, state: SharedArrayBuffer, files: CheckpointFiles, onLost: (error: QueueSyncLostError) => void) {
    this.#db = db;
    this.#state = new Int32Array(state);
    this.#files = files;
    this.#onLost = onLost;
  }

  /** A checkpoint's pages were lost, in this thread or another. */
  get lost(): boolean {
    return Atomics.load(this.#state, LOST) !== 0;
  }

  /**
   * The disk dropped pages the file was to keep (a checkpoint's, or a commit's whose log sync
   * failed, log-sync.ts): no checkpoint runs again in this process, and `onLost` hears of it once.
   */
  lose(cause: unknown): QueueSyncLostError {
    const lost = new QueueSyncLostError({ cause });
    if (Atomics.compareExchange(this.#state, LOST, 0, 1) === 0) this.#onLost(lost);
    return lost;
  }

  /**
   * After a commit: a passive checkpoint when the log holds CHECKPOINT_PAGES or more, whichever
   * connection's commits put them there, as SQLite's automatic one would. Never throws: the commit
   * stands, and a loss is reported to `onLost`. As SQLite's, a checkpoint that failed (a full
   * disk, its fsync), found another running, or that readers held to part of the log is tried
   * again at the next commit.
   */
  afterCommit(): void {
    if (this.#logPages() < CHECKPOINT_PAGES) return;
    try {
      this.run('PASSIVE');
    } catch {
      // A full disk, SQLite's fsync failed, or lost (reported): the next commit tries again.
    }
  }

  /** The log's committed pages, from the wal-index header (a torn read only makes a checkpoint early or late). */
  #logPages(): number {
    try {
      if (readSync(this.#files.shm, this.#header, 0, 4, MX_FRAME_OFFSET) < 4) return 0;
      return this.#header.readUInt32LE(0);
    } catch {
      return 0;
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
      if (result.checkpointed > 0) {
        try {
          this.#fsync();
        } catch (error) {
          throw this.lose(error);
        }
      }
      return result;
    } finally {
      Atomics.store(this.#state, LOCK, 0);
      Atomics.notify(this.#state, LOCK);
    }
  }

  #fsync(): void {
    fsyncSync(this.#files.db);
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
