import { randomFillSync } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Room the queue keeps for itself on its file system. When the disk is full, SQLite can commit
 * nothing, not even the few pages that record a delivery or drop a delivered segment (its
 * write-ahead log cannot grow, and the checkpoint that would let it start over must add the pages
 * the log holds to the database file): the backlog could never move again. So:
 *
 * - ingest commits only while the file system keeps a margin free (`roomFor`): the size of the
 *   reserve plus twice the commit; below it the log is folded into the queue file, and when that
 *   gives too little back ingest refuses, and resumes only once twice the margin is free again
 *   (`roomToResume`), after the sinks' delivered segments were handed back;
 * - `DATA_DIR/queue.reserve`, a file of that size, covers a disk that something else filled: the
 *   delivery thread deletes it on SQLITE_FULL and records its deliveries in the room it gives;
 *   the ingest thread makes it again before ingest resumes.
 *
 * The size is an eighth of the file system, between 256 KiB and 4 MiB: on the appliance's SD card
 * 4 MiB, several times what the log holds between checkpoints (about 1 MiB), which is what a
 * checkpoint on a full disk may have to add to the queue file.
 */
export const reservePath = (dataDir: string): string => join(dataDir, 'queue.reserve');

const MIN_BYTES = 256 * 1024;
const MAX_BYTES = 4 * 1024 * 1024;
const CHUNK = 256 * 1024;

/** The reserve's size for the file system `dataDir` is on. */
export function reserveBytes(dataDir: string): number {
  const fs = statfsSync(dataDir);
  return Math.min(MAX_BYTES, Math.max(MIN_BYTES, Math.floor((fs.blocks * fs.bsize) / 8)));
}

/** Bytes the file system has free for this user. */
export function freeBytes(dataDir: string): number {
  const fs = statfsSync(dataDir);
  return fs.bavail * fs.bsize;
}

export class DiskReserve {
  readonly path: string;
  readonly bytes: number;

  /** Whether the reserve is kept: not for a queue that asked for none, nor on a file system that reports no size. */
  private readonly keep: boolean;

  /** `keep`: false for a queue that keeps no reserve (tests of other things): present and made, as far as it asks. */
  constructor(
    readonly dataDir: string,
    keep = true,
  ) {
    this.path = reservePath(dataDir);
    this.keep = keep && statfsSync(dataDir).blocks > 0;
    this.bytes = this.keep ? reserveBytes(dataDir) : 0;
  }

  get present(): boolean {
    return !this.keep || existsSync(this.path);
  }

  /** A commit of `bytes` leaves the margin free (a statfs; always, for a queue without reserve). */
  roomFor(bytes: number): boolean {
    return !this.keep || freeBytes(this.dataDir) >= this.bytes + 2 * bytes;
  }

  /** How many pages of `pageSize` a compaction may move: their log frames take at most half the free room. */
  pagesToMove(pageSize: number): number {
    return this.keep ? Math.floor(freeBytes(this.dataDir) / 2 / (pageSize + 24)) : Number.POSITIVE_INFINITY;
  }

  /** After a full disk: twice the margin is free again. */
  roomToResume(): boolean {
    return !this.keep || freeBytes(this.dataDir) >= 2 * this.bytes;
  }

  /**
   * Makes the reserve when it is missing and the file system has room for it and as much again
   * besides; true when it is there afterwards. Its bytes are random, so a compressing file system
   * cannot shrink it, and written whole before it takes its name.
   */
  ensure(): boolean {
    if (this.present) return true;
    if (freeBytes(this.dataDir) < 2 * this.bytes) return false;
    const temporary = `${this.path}.tmp`;
    try {
      const fd = openSync(temporary, 'w', 0o600);
      try {
        const chunk = Buffer.alloc(CHUNK);
        for (let written = 0; written < this.bytes; written += CHUNK) {
          randomFillSync(chunk);
          writeSync(fd, chunk, 0, Math.min(CHUNK, this.bytes - written));
        }
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(temporary, this.path);
      return true;
    } catch {
      rmSync(temporary, { force: true });
      return false;
    }
  }
}

/** Deletes the reserve of `dataDir` (the delivery thread, on a full disk); true when there was one. */
export function releaseReserve(dataDir: string): boolean {
  const path = reservePath(dataDir);
  if (!existsSync(path)) return false;
  rmSync(path, { force: true });
  return true;
}

/** SQLite could not write for want of disk space. */
export const isDiskFull = (error: unknown): boolean => (error as { code?: unknown }).code === 'SQLITE_FULL';
