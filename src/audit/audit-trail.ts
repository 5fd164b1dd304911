import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import {
  type AuditAction,
  type AuditEntry,
  type AuditInput,
  type AuditOutcome,
  describeEntry,
  entryOf,
  isRepeatable,
} from './audit-entry.js';
import { AuditFile, auditPath } from './audit-file.js';
import { RepeatWindows } from './repeat-windows.js';

export interface AuditTrailOptions {
  dataDir: string;
  logger: Logger;
  /** How often gathered entries are written, and the file is read for those of other processes. */
  flushMs?: number;
  /** How long refused or throttled logins from one address are gathered into one entry. */
  windowMs?: number;
  /** How long the file stays open after its last use. */
  idleCloseMs?: number;
  now?: () => number;
}

/** Entries waiting to be written at most: past it they are written at once. */
const MAX_PENDING = 256;
/** Entries held while the file cannot be written; past it the oldest are let go (they are in the log). */
const MAX_HELD = 1000;
/**
 * A file changed this recently when it was last looked at may change again with the same size and
 * time stamp as seen (file times move in steps of the kernel's clock tick): it is looked at again.
 */
const UNSETTLED_MS = 1000;

export interface AuditCount {
  action: AuditAction;
  outcome: AuditOutcome;
  count: number;
}

/**
 * The gateway's side of the audit trail. Each entry is a log line (`event: 'audit'`) and a count
 * at once, and is written to `DATA_DIR/audit.db` with the others of the last `flushMs` in one
 * transaction. Refused and throttled logins are gathered per address (RepeatWindows), so a flood of
 * them costs neither a write nor a log line each. Entries other processes wrote (the command line,
 * the appliance's tools) are read from the file at the same pace: logged and counted here too.
 *
 * The file stays open while the trail is busy and is closed after `idleCloseMs` without a write or
 * a read: a flood of refused logins costs one opening, not one a tick. Its appends are synced in
 * the thread pool (AuditFile `deferred`), one sync at a time, not on the event loop the devices'
 * requests share; only the close after an idle minute (and at stop) syncs there, by SQLite's
 * checkpoint of the last connection. Idle, it holds no connection to the file, and a tick with nothing to write looks at the file (a
 * stat of it and its log) and opens it only when another process changed it.
 */
export class AuditTrail {
  readonly #options: Required<Omit<AuditTrailOptions, 'logger' | 'dataDir'>> & Pick<AuditTrailOptions, 'logger' | 'dataDir'>;
  /** Marks this process's entries in the file. */
  readonly #writer = randomBytes(8).toString('hex');
  readonly #windows: RepeatWindows;
  readonly #counts = new Map<string, AuditCount>();
  #pending: AuditEntry[] = [];
  #fileProblem: string | undefined;
  /** The last id of the file seen, so only entries after it are read as others'. */
  #seenId = 0;
  /** The file and its log as a stat saw them after the last read: while they look the same, nobody wrote. */
  #seenState = '';
  /** The file had just changed at the last read: read it at the next tick whatever it looks like. */
  #unsettled = true;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** The file while the trail is busy, and when it was last used. */
  #file: AuditFile | undefined;
  #usedMs = 0;
  /** A sync of the log runs; another was asked for meanwhile. */
  #syncing = false;
  #syncAgain = false;

  constructor(options: AuditTrailOptions) {
    this.#options = { flushMs: 5000, windowMs: 60_000, idleCloseMs: 60_000, now: Date.now, ...options };
    this.#windows = new RepeatWindows(this.#options.windowMs);
    // What is in the file already was there before this start: counted from here on.
    this.#visit((file) => {
      this.#seenId = file.lastId();
    });
    this.#release();
  }

  /** Writes and reads every `flushMs` until `close()`; the timer never keeps the process alive. */
  start(): void {
    this.#timer ??= setInterval(() => this.tick(), this.#options.flushMs).unref();
  }

  record(input: AuditInput): void {
    if (this.#closed) return;
    this.#count(input.action, input.outcome, 1);
    const now = this.#options.now();
    const entry = isRepeatable(input) ? this.#windows.add(input, now) : entryOf(input, now);
    if (entry !== undefined) this.#keep(entry);
  }

  /** Closes the windows that are due, writes what waits, reads what others wrote (if anyone wrote). */
  tick(): void {
    for (const entry of this.#windows.close(this.#options.now())) this.#keep(entry);
    if (this.#pending.length > 0 || this.#unsettled || this.#fileState().state !== this.#seenState) this.#flush();
    else if (this.#file !== undefined && this.#options.now() - this.#usedMs >= this.#options.idleCloseMs) this.#release();
  }

  /** The newest entries, newest first: those written, those waiting and the windows still open. */
  latest(limit: number): AuditEntry[] {
    const stored = this.#visit((file) => file.latest(limit)) ?? [];
    return [...this.#pending, ...this.#windows.pending(), ...stored].sort((a, b) => b.atMs - a.atMs).slice(0, limit);
  }

  /** Occurrences since start by action and outcome (each refused login counts, gathered or not). */
  counts(): AuditCount[] {
    return [...this.#counts.values()];
  }

  /** The gateway stops: the open windows become entries and everything is written. */
  close(): void {
    if (this.#closed) return;
    clearInterval(this.#timer);
    for (const entry of this.#windows.close(Number.POSITIVE_INFINITY)) this.#keep(entry);
    this.#flush();
    // The last connection's checkpoint syncs what the gateway appended.
    this.#release();
    this.#closed = true;
  }

  #keep(entry: AuditEntry): void {
    this.#log(entry);
    this.#pending.push(entry);
    if (this.#pending.length >= MAX_PENDING) this.#flush();
  }

  /** Writes what waits and reads what others wrote, in one opening of the file. */
  #flush(): void {
    this.#visit((file) => {
      if (this.#pending.length === 0) return;
      file.append(this.#pending, this.#writer);
      this.#pending = [];
      this.#fileProblem = undefined;
      this.#syncLog(file);
    });
    if (this.#pending.length > MAX_HELD) this.#pending = this.#pending.slice(-MAX_HELD);
  }

  /** Syncs the file's log in the thread pool; asked while one runs, once more after it. */
  #syncLog(file: AuditFile): void {
    if (this.#syncing) {
      this.#syncAgain = true;
      return;
    }
    this.#syncing = true;
    file
      .syncLog()
      .catch((error: NodeJS.ErrnoException) => {
        // Gone: the last connection closed and its checkpoint synced the entries into the file.
        if (error.code !== 'ENOENT') this.#problem(error);
      })
      .finally(() => {
        this.#syncing = false;
        if (!this.#syncAgain) return;
        this.#syncAgain = false;
        // Closed meanwhile: its checkpoint synced what was appended.
        if (this.#file !== undefined) this.#syncLog(this.#file);
      });
  }

  /**
   * Closes the file when open, and notes how it looks after (the close removes its log), unless
   * another process wrote since the last read: the next tick reads that.
   */
  #release(): void {
    const file = this.#file;
    if (file === undefined) return;
    this.#file = undefined;
    const unchanged = this.#fileState().state === this.#seenState;
    try {
      file.close();
    } catch (error) {
      this.#problem(error);
    }
    if (unchanged) this.#seenState = this.#fileState().state;
  }

  /**
   * Does `use` with the file, opened unless it is, and reads what others wrote since the last read;
   * undefined when the file cannot be opened or `use` failed (said once by #problem, and closed).
   */
  #visit<T>(use: (file: AuditFile) => T): T | undefined {
    if (this.#closed) return undefined;
    let file = this.#file;
    if (file === undefined) {
      try {
        file = AuditFile.open(this.#options.dataDir, { busyTimeoutMs: 1000, sync: 'deferred' });
      } catch (error) {
        this.#problem(error);
        return undefined;
      }
      this.#file = file;
    }
    this.#usedMs = this.#options.now();
    let result: T | undefined;
    try {
      result = use(file);
      this.#readOthers(file);
    } catch (error) {
      this.#problem(error);
      this.#release();
      return undefined;
    }
    // The file as the next tick will find it, unless someone else writes meanwhile.
    const { state, changedMs } = this.#fileState();
    this.#seenState = state;
    this.#unsettled = Date.now() - changedMs < UNSETTLED_MS;
    return result;
  }

  #readOthers(file: AuditFile): void {
    const { entries, lastId } = file.othersAfter(this.#seenId, this.#writer);
    for (const entry of entries) {
      this.#count(entry.action, entry.outcome, entry.count);
      this.#log(entry);
    }
    this.#seenId = lastId;
  }

  /** Identity, size and change time of the file and its log, as one string, and the later change time. */
  #fileState(): { state: string; changedMs: number } {
    const path = auditPath(this.#options.dataDir);
    let changedMs = 0;
    const state = [path, `${path}-wal`]
      .map((name) => {
        try {
          const stat = statSync(name, { bigint: true });
          changedMs = Math.max(changedMs, Number(stat.mtimeNs / 1_000_000n));
          return `${stat.ino}:${stat.size}:${stat.mtimeNs}`;
        } catch {
          return '-';
        }
      })
      .join(' ');
    return { state, changedMs };
  }

  #count(action: AuditAction, outcome: AuditOutcome, n: number): void {
    const key = `${action}\0${outcome}`;
    const counted = this.#counts.get(key);
    if (counted === undefined) this.#counts.set(key, { action, outcome, count: n });
    else counted.count += n;
  }

  #log(entry: AuditEntry): void {
    const { atMs, firstMs, ...fields } = entry;
    const line = {
      event: 'audit',
      ...fields,
      at: new Date(atMs).toISOString(),
      ...(entry.count > 1 ? { firstAt: new Date(firstMs).toISOString() } : {}),
    };
    if (entry.outcome === 'ok') this.#options.logger.info(line, describeEntry(entry));
    else this.#options.logger.warn(line, describeEntry(entry));
  }

  /** Said once until the file works again: the entries stay in the log and the counters meanwhile. */
  #problem(error: unknown): void {
    const message = (error as Error).message;
    if (message === this.#fileProblem) return;
    this.#fileProblem = message;
    this.#options.logger.error(
      { event: 'audit_file_failed', dataDir: this.#options.dataDir, err: error },
      'the audit trail file cannot be written; its entries are logged and counted meanwhile',
    );
  }
}
