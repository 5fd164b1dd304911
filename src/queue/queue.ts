import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { QueueRefusedError, classifyWriteError } from './queue-errors.js';

export type Durability = 'power-loss' | 'process-crash';

export interface QueueOptions {
  dataDir: string;
  durability: Durability;
  /** Bound of queued payload bytes; appends beyond it are refused, nothing queued is dropped. */
  maxBytes: number;
}

/** One request's readings, as stored. */
export interface QueueRecord {
  id: number;
  receivedMs: number;
  readings: number;
  bytes: number;
  payload: string;
}

export interface DeadLetterInput {
  receivedMs: number;
  reason: string;
  /** The reading as a record line (see record-codec). */
  line: string;
}

export interface QueueStats {
  /** Transactions that committed appends since open; appends per commit shows group commit at work. */
  commits: number;
  records: number;
  readings: number;
  bytes: number;
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

const SCHEMA_VERSION = 1;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS queue (
  id          INTEGER PRIMARY KEY,
  received_ms INTEGER NOT NULL,
  readings    INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,
  payload     TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
  -- AUTOINCREMENT: ids are never reused, so an operator's purge of #7 cannot hit a newer letter.
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  received_ms INTEGER NOT NULL,
  failed_ms   INTEGER NOT NULL,
  reason      TEXT    NOT NULL,
  line        TEXT    NOT NULL
);
`;

/**
 * The SQLite write-ahead queue. Appends made while the event loop is busy are committed together
 * in one transaction (group commit), and each append's promise settles only after that commit.
 */
export class WriteAheadQueue {
  readonly path: string;
  readonly durability: Durability;
  readonly maxBytes: number;
  readonly #db: Database.Database;
  #pending: PendingAppend[] = [];
  #records = 0;
  #readings = 0;
  /** Bytes committed plus bytes reserved by appends awaiting their commit. */
  #bytes = 0;
  #commits = 0;
  /** Set when an append was refused for size; cleared when the flusher frees space. */
  #full = false;
  #closed = false;
  #lastWriteFailureMs: number | undefined;

  readonly #insert: Database.Statement<[number, number, number, string]>;
  readonly #insertMany: (batch: PendingAppend[]) => void;
  readonly #selectOldest: Database.Statement<[], QueueRecord>;
  readonly #oldestReceived: Database.Statement<[], { receivedMs: number }>;
  readonly #complete: (lastId: number, deadLetters: readonly DeadLetterInput[], failedMs: number) => void;
  readonly #deadLetterCount: Database.Statement<[], { count: number }>;
  readonly #dataVersion: Database.Statement<[], number>;
  #lastDataVersion: number;

  private constructor(options: QueueOptions) {
    mkdirSync(options.dataDir, { recursive: true, mode: 0o750 });
    this.path = join(options.dataDir, 'queue.db');
    this.durability = options.durability;
    this.maxBytes = options.maxBytes;
    this.#db = new Database(this.path);
    const db = this.#db;
    db.pragma('journal_mode = WAL');
    // FULL fsyncs the WAL on every commit; NORMAL leaves commits in the OS page cache until checkpoint.
    db.pragma(`synchronous = ${options.durability === 'power-loss' ? 'FULL' : 'NORMAL'}`);
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_size_limit = 67108864');
    // Lets compact() hand space back after a long outage; takes effect on new queue files.
    db.pragma('auto_vacuum = INCREMENTAL');
    db.exec(SCHEMA);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);

    this.#insert = db.prepare('INSERT INTO queue (received_ms, readings, bytes, payload) VALUES (?, ?, ?, ?)');
    this.#insertMany = db.transaction((batch: PendingAppend[]) => {
      for (const item of batch) this.#insert.run(item.receivedMs, item.readings, item.bytes, item.payload);
    });
    this.#selectOldest = db.prepare(
      'SELECT id, received_ms AS receivedMs, readings, bytes, payload FROM queue ORDER BY id',
    );
    this.#oldestReceived = db.prepare('SELECT received_ms AS receivedMs FROM queue ORDER BY id LIMIT 1');
    const deleteUpTo = db.prepare<[number]>('DELETE FROM queue WHERE id <= ?');
    const insertDeadLetter = db.prepare<[number, number, string, string]>(
      'INSERT INTO dead_letters (received_ms, failed_ms, reason, line) VALUES (?, ?, ?, ?)',
    );
    this.#complete = db.transaction((lastId: number, deadLetters: readonly DeadLetterInput[], failedMs: number) => {
      for (const d of deadLetters) insertDeadLetter.run(d.receivedMs, failedMs, d.reason, d.line);
      deleteUpTo.run(lastId);
    });
    this.#deadLetterCount = db.prepare('SELECT COUNT(*) AS count FROM dead_letters');
    this.#dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck() as Database.Statement<[], number>;
    this.#lastDataVersion = this.#dataVersion.get() as number;
    this.recount();
  }

  static open(options: QueueOptions): WriteAheadQueue {
    return new WriteAheadQueue(options);
  }

  /** Queues one request's readings; resolves once they are committed, rejects with QueueRefusedError. */
  append(payload: string, readings: number, receivedMs: number): Promise<void> {
    if (this.#closed) return Promise.reject(new QueueRefusedError('closed', 'The gateway is stopping; retry shortly'));
    const bytes = Buffer.byteLength(payload);
    if (this.#bytes + bytes > this.maxBytes) {
      this.#full = true;
      return Promise.reject(
        new QueueRefusedError('full', 'The gateway queue is full while QuestDB catches up; retry later'),
      );
    }
    this.#bytes += bytes;
    return new Promise<void>((resolve, reject) => {
      if (this.#pending.push({ payload, readings, bytes, receivedMs, resolve, reject }) === 1) {
        setImmediate(this.#commitPending);
      }
    });
  }

  /** Full: an append was refused for size and no space has been freed since. */
  isFull(): boolean {
    return this.#full || this.#bytes >= this.maxBytes;
  }

  /** Writable: open, below its bound, and no write failed (disk full, I/O) in the last few seconds. */
  isWritable(now = Date.now()): boolean {
    return !this.#closed && !this.isFull() && (this.#lastWriteFailureMs === undefined || now - this.#lastWriteFailureMs > 5000);
  }

  readonly #commitPending = (): void => {
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    try {
      this.#insertMany(batch);
    } catch (error) {
      const refusal = classifyWriteError(error);
      this.#lastWriteFailureMs = Date.now();
      for (const item of batch) {
        this.#bytes -= item.bytes;
        item.reject(refusal);
      }
      return;
    }
    this.#lastWriteFailureMs = undefined;
    this.#commits += 1;
    for (const item of batch) {
      this.#records += 1;
      this.#readings += item.readings;
      item.resolve();
    }
  };

  /** The oldest records, in order, until `maxReadings` or `maxBytes` is reached (at least one record). */
  readOldest(maxReadings: number, maxBytes: number): QueueRecord[] {
    // Records another process added must be counted before they can be completed.
    this.syncExternalChanges();
    const records: QueueRecord[] = [];
    let readings = 0;
    let bytes = 0;
    for (const record of this.#selectOldest.iterate()) {
      records.push(record);
      readings += record.readings;
      bytes += record.bytes;
      if (readings >= maxReadings || bytes >= maxBytes) break;
    }
    return records;
  }

  /**
   * Removes the given oldest records (QuestDB holds their readings) and stores the readings QuestDB
   * refused as dead letters, in one transaction.
   */
  complete(records: readonly QueueRecord[], deadLetters: readonly DeadLetterInput[] = []): void {
    const last = records[records.length - 1];
    if (last === undefined) return;
    this.#complete(last.id, deadLetters, Date.now());
    this.#full = false;
    for (const record of records) {
      this.#records -= 1;
      this.#readings -= record.readings;
      this.#bytes -= record.bytes;
    }
  }

  stats(): QueueStats {
    return { commits: this.#commits, records: this.#records, readings: this.#readings, bytes: this.#bytes, maxBytes: this.maxBytes };
  }

  oldestReceivedMs(): number | undefined {
    return this.#oldestReceived.get()?.receivedMs;
  }

  deadLetterCount(): number {
    return this.#deadLetterCount.get()?.count ?? 0;
  }

  /** The database answers queries: for the systemd watchdog. */
  isHealthy(): boolean {
    if (this.#closed) return false;
    try {
      return this.#dataVersion.get() !== undefined;
    } catch {
      return false;
    }
  }

  /** Recounts when another process (the dead-letter CLI) changed the file since the last call. */
  syncExternalChanges(): boolean {
    if (this.#closed) return false;
    const version = this.#dataVersion.get() as number;
    if (version === this.#lastDataVersion) return false;
    this.#lastDataVersion = version;
    this.recount();
    return true;
  }

  /** Returns free pages to the file system once a backlog has drained; bounded work per call. */
  compact(maxPages = 16_384): number {
    if (this.#closed) return 0;
    const free = this.#db.pragma('freelist_count', { simple: true }) as number;
    if (free === 0) return 0;
    this.#db.pragma(`incremental_vacuum(${Math.min(free, maxPages)})`);
    return Math.min(free, maxPages);
  }

  /** Re-reads the counters from disk, e.g. after an operator re-queued dead letters from the CLI. */
  recount(): void {
    const row = this.#db
      .prepare('SELECT COUNT(*) AS records, COALESCE(SUM(readings), 0) AS readings, COALESCE(SUM(bytes), 0) AS bytes FROM queue')
      .get() as { records: number; readings: number; bytes: number };
    const reserved = this.#pending.reduce((sum, item) => sum + item.bytes, 0);
    this.#records = row.records;
    this.#readings = row.readings;
    this.#bytes = row.bytes + reserved;
    this.#full = false;
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
