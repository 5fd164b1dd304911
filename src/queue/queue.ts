import type Database from 'better-sqlite3';
import { QueueRefusedError, classifyWriteError } from './queue-errors.js';
import { openQueueFile, queuePath, totalsReader, type Durability, type Totals } from './queue-file.js';

export type { Durability } from './queue-file.js';

export interface QueueOptions {
  dataDir: string;
  durability: Durability;
  /** Bound of queued payload bytes; appends beyond it are refused, nothing queued is dropped. */
  maxBytes: number;
}

export interface QueueStats extends Totals {
  /** Transactions that committed appends since open; appends per commit shows group commit at work. */
  commits: number;
  maxBytes: number;
}

interface PendingAppend {
  payload: string;
  readings: number;
  bytes: number;
  receivedMs: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * The ingest side of the SQLite write-ahead queue. Appends made while the event loop is busy are
 * committed together in one transaction (group commit), and each append's promise settles only
 * after that commit. The flusher removes records through its own connection (QueueConsumer).
 */
export class WriteAheadQueue {
  readonly path: string;
  readonly dataDir: string;
  readonly durability: Durability;
  readonly maxBytes: number;
  readonly #db: Database.Database;
  readonly #readTotals: () => Totals;
  readonly #insertMany: (batch: PendingAppend[]) => void;
  readonly #oldestReceived: Database.Statement<[], { receivedMs: number }>;
  readonly #deadLetterCount: Database.Statement<[], { count: number }>;
  #pending: PendingAppend[] = [];
  /** Totals on disk as last read; the flusher only ever lowers them, so they err on the full side. */
  #totals: Totals;
  /** Bytes of appends waiting for their commit. */
  #reserved = 0;
  #commits = 0;
  /** Set when an append was refused for size; cleared once the flusher has made room. */
  #full = false;
  #closed = false;
  #lastWriteFailureMs: number | undefined;

  private constructor(options: QueueOptions) {
    this.dataDir = options.dataDir;
    this.path = queuePath(options.dataDir);
    this.durability = options.durability;
    this.maxBytes = options.maxBytes;
    this.#db = openQueueFile(options.dataDir, options.durability, { create: true });
    const db = this.#db;
    this.#readTotals = totalsReader(db);
    const insert = db.prepare<[number, number, number, string]>('INSERT INTO queue (received_ms, readings, bytes, payload) VALUES (?, ?, ?, ?)');
    this.#insertMany = db.transaction((batch: PendingAppend[]) => {
      for (const item of batch) insert.run(item.receivedMs, item.readings, item.bytes, item.payload);
    });
    this.#oldestReceived = db.prepare('SELECT received_ms AS receivedMs FROM queue ORDER BY id LIMIT 1');
    this.#deadLetterCount = db.prepare('SELECT COUNT(*) AS count FROM dead_letters');
    this.#totals = this.#readTotals();
  }

  static open(options: QueueOptions): WriteAheadQueue {
    return new WriteAheadQueue(options);
  }

  /** Queues one request's readings; resolves once they are committed, rejects with QueueRefusedError. */
  append(payload: string, readings: number, receivedMs: number): Promise<void> {
    if (this.#closed) return Promise.reject(new QueueRefusedError('closed', 'The gateway is stopping; retry shortly'));
    const bytes = Buffer.byteLength(payload);
    if (this.#totals.bytes + this.#reserved + bytes > this.maxBytes) {
      this.#full = true;
      return Promise.reject(new QueueRefusedError('full', 'The gateway queue is full while QuestDB catches up; retry later'));
    }
    this.#reserved += bytes;
    return new Promise<void>((resolve, reject) => {
      if (this.#pending.push({ payload, readings, bytes, receivedMs, resolve, reject }) === 1) {
        setImmediate(this.#commitPending);
      }
    });
  }

  readonly #commitPending = (): void => {
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    for (const item of batch) this.#reserved -= item.bytes;
    try {
      this.#insertMany(batch);
    } catch (error) {
      const refusal = classifyWriteError(error);
      this.#lastWriteFailureMs = Date.now();
      for (const item of batch) item.reject(refusal);
      return;
    }
    this.#lastWriteFailureMs = undefined;
    this.#commits += 1;
    this.#totals = this.#readTotals();
    for (const item of batch) item.resolve();
  };

  /** Re-reads the totals after the flusher removed records. */
  refresh(): void {
    if (this.#closed) return;
    this.#totals = this.#readTotals();
    if (this.#totals.bytes + this.#reserved < this.maxBytes) this.#full = false;
  }

  /** Full: an append was refused for size and no room has been made since. */
  isFull(): boolean {
    return this.#full;
  }

  /** Writable: open, not full, and no write failed (disk full, I/O) in the last few seconds. */
  isWritable(now = Date.now()): boolean {
    return !this.#closed && !this.#full && (this.#lastWriteFailureMs === undefined || now - this.#lastWriteFailureMs > 5000);
  }

  /** The database answers queries: for the systemd watchdog. */
  isHealthy(): boolean {
    if (this.#closed) return false;
    try {
      this.#readTotals();
      return true;
    } catch {
      return false;
    }
  }

  stats(): QueueStats {
    return { ...this.#totals, commits: this.#commits, maxBytes: this.maxBytes };
  }

  oldestReceivedMs(): number | undefined {
    return this.#oldestReceived.get()?.receivedMs;
  }

  deadLetterCount(): number {
    return this.#deadLetterCount.get()?.count ?? 0;
  }

  /** Returns free pages to the file system once a backlog has drained; bounded work per call. */
  compact(maxPages = 16_384): number {
    if (this.#closed) return 0;
    const free = this.#db.pragma('freelist_count', { simple: true }) as number;
    if (free === 0) return 0;
    this.#db.pragma(`incremental_vacuum(${Math.min(free, maxPages)})`);
    return Math.min(free, maxPages);
  }

  /**
   * Commits what is pending, checkpoints the WAL into the database file and closes it. Returns
   * false when the checkpoint failed (a full disk): the WAL stays and is replayed at the next open.
   */
  close(): boolean {
    if (this.#closed) return true;
    this.#commitPending();
    this.#closed = true;
    try {
      this.#db.pragma('wal_checkpoint(TRUNCATE)');
      return true;
    } catch {
      return false;
    } finally {
      this.#db.close();
    }
  }
}
