import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';

/**
 * In `power-loss` mode, the fsync that makes ingest's commits durable, run on libuv's thread pool
 * so that the event loop goes on reading requests meanwhile. The ingest connection commits with
 * `synchronous = NORMAL` (queue-file.ts), and its appends are answered only once a sync of the log
 * that began after their commit has succeeded.
 *
 * The log is synced through a descriptor of its own, opened when the queue opens. Linux (4.13 on)
 * reports a failed writeback of a file once to every descriptor open at the time, whichever
 * descriptor's fsync met it: a sync of SQLite's (a checkpoint, the sinks' commits) that dropped
 * pages of a commit waiting here fails this sync too, and the queue stops as after a lost
 * checkpoint (checkpoint.ts) instead of answering for readings the disk no longer holds.
 */
export class LogSync {
  readonly #fd: number;
  #running = false;
  #closeWhenDone = false;

  /** Opens the log of the queue file at `path`; the ingest connection has opened (created) it. */
  constructor(path: string) {
    this.#fd = openSync(`${path}-wal`, 'r');
  }

  /** A sync is on the thread pool. */
  get running(): boolean {
    return this.#running;
  }

  /** Syncs the log in the background; `done` gets the error of a failed sync (then nothing may be answered). */
  start(done: (error: Error | null) => void): void {
    this.#running = true;
    fdatasync(this.#fd, (error) => {
      this.#running = false;
      if (this.#closeWhenDone) this.#close();
      done(error);
    });
  }

  /** Syncs the log on this thread (at close); throws the sync's error. */
  now(): void {
    fdatasyncSync(this.#fd);
  }

  /** Closes the descriptor, after the sync on the thread pool if one runs. */
  close(): void {
    if (this.#running) this.#closeWhenDone = true;
    else this.#close();
  }

  #close(): void {
    try {
      closeSync(this.#fd);
    } catch {
      // A read-only descriptor: an EIO at close loses nothing.
    }
  }
}
