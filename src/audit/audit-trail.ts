import { randomBytes } from 'node:crypto';
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
import { AuditFile } from './audit-file.js';
import { RepeatWindows } from './repeat-windows.js';

export interface AuditTrailOptions {
  dataDir: string;
  logger: Logger;
  /** How often gathered entries are written, and the file is read for those of other processes. */
  flushMs?: number;
  /** How long refused or throttled logins from one address are gathered into one entry. */
  windowMs?: number;
  now?: () => number;
}

/** Entries waiting to be written at most: past it they are written at once. */
const MAX_PENDING = 256;
/** Entries held while the file cannot be written; past it the oldest are let go (they are in the log). */
const MAX_HELD = 1000;

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
 */
export class AuditTrail {
  readonly #options: Required<Omit<AuditTrailOptions, 'logger' | 'dataDir'>> & Pick<AuditTrailOptions, 'logger' | 'dataDir'>;
  /** Marks this process's entries in the file. */
  readonly #writer = randomBytes(8).toString('hex');
  readonly #windows: RepeatWindows;
  readonly #counts = new Map<string, AuditCount>();
  #pending: AuditEntry[] = [];
  #file: AuditFile | undefined;
  #fileProblem: string | undefined;
  /** The last id of the file seen, so only entries after it are read as others'. */
  #seenId = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: AuditTrailOptions) {
    this.#options = { flushMs: 5000, windowMs: 60_000, now: Date.now, ...options };
    this.#windows = new RepeatWindows(this.#options.windowMs);
    // What is in the file already was there before this start: counted from here on.
    this.#seenId = this.#openFile()?.lastId() ?? 0;
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

  /** Closes the windows that are due, writes what waits, reads what others wrote. */
  tick(): void {
    for (const entry of this.#windows.close(this.#options.now())) this.#keep(entry);
    this.#flush();
    this.#readOthers();
  }

  /** The newest entries, newest first: those written, those waiting and the windows still open. */
  latest(limit: number): AuditEntry[] {
    let stored: AuditEntry[] = [];
    try {
      stored = this.#openFile()?.latest(limit) ?? [];
    } catch (error) {
      this.#problem(error);
    }
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
    this.#readOthers();
    this.#closed = true;
    this.#file?.close();
    this.#file = undefined;
  }

  #keep(entry: AuditEntry): void {
    this.#log(entry);
    this.#pending.push(entry);
    if (this.#pending.length >= MAX_PENDING) this.#flush();
  }

  #flush(): void {
    if (this.#pending.length === 0) return;
    const file = this.#openFile();
    if (file !== undefined) {
      try {
        file.append(this.#pending, this.#writer);
        this.#pending = [];
        this.#fileProblem = undefined;
        return;
      } catch (error) {
        this.#problem(error);
      }
    }
    if (this.#pending.length > MAX_HELD) this.#pending = this.#pending.slice(-MAX_HELD);
  }

  #readOthers(): void {
    const file = this.#openFile();
    if (file === undefined) return;
    try {
      const { entries, lastId } = file.othersAfter(this.#seenId, this.#writer);
      for (const entry of entries) {
        this.#count(entry.action, entry.outcome, entry.count);
        this.#log(entry);
      }
      this.#seenId = lastId;
    } catch (error) {
      this.#problem(error);
    }
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

  #openFile(): AuditFile | undefined {
    if (this.#file === undefined && !this.#closed) {
      try {
        this.#file = AuditFile.open(this.#options.dataDir, { busyTimeoutMs: 1000 });
      } catch (error) {
        this.#problem(error);
      }
    }
    return this.#file;
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
