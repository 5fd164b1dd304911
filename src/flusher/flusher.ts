import type { Logger } from 'pino';
import type { Completion, DeadLetterInput, QueueReader, QueueRecord } from '../queue/queue-reader.js';
import type { Progress } from '../queue/queue-file.js';
import { RecordCorruptError, decodeRecord, formatLine, type QueuedReading } from '../queue/record-codec.js';
import { Backoff } from './backoff.js';
import { IlpEncoder } from './ilp-encoder.js';
import type { QuestDbClient } from '../questdb/questdb-http.js';
import { TableSchemaError, checkTable, setUpTable } from './table-setup.js';

export interface FlusherOptions {
  table: string;
  retentionDays: number;
  intervalMs: number;
  batchReadings: number;
  batchBytes: number;
  backoffMaxMs: number;
}

/** What the flusher tells the rest of the gateway. */
export interface FlushEvents {
  flushed(result: Completion & { flushed: number; durationMs: number }): void;
  failed(result: { message: string; readings: number; durationMs: number }): void;
}

/** What the flusher uses of the queue's reading half. */
export type FlusherQueue = Pick<QueueReader, 'readOldest' | 'complete'>;

/** `full`: a whole batch was flushed, so more is probably waiting. */
type Outcome = 'empty' | 'flushed' | 'full' | 'failed';

/** Records read for one request, and their ILP unless one of them cannot be decoded. */
interface Batch {
  records: QueueRecord[];
  full: boolean;
  body: Buffer | undefined;
}

const MAX_REASON_LENGTH = 1000;
const BACKOFF_BASE_MS = 250;

/**
 * Ships the oldest queued readings to QuestDB on a timer, one request in flight at a time, and
 * moves the queue's progress mark past them only after QuestDB confirmed them. Failures back off
 * with jitter and leave the queue intact; rows QuestDB refuses for their content become dead letters.
 */
export class Flusher {
  readonly #reader: FlusherQueue;
  readonly #questdb: QuestDbClient;
  readonly #events: FlushEvents;
  readonly #log: Logger;
  readonly #options: FlusherOptions;
  readonly #encoder: IlpEncoder;
  readonly #backoff: Backoff;
  #tableReady = false;
  #stopping = false;
  /** Set when shutdown gave up waiting: a late answer must not touch the queue any more. */
  #abandoned = false;
  #backingOff = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  /** The next batch, read and encoded while the previous one was on its way to QuestDB. */
  #readAhead: Batch | undefined;

  constructor(deps: { reader: FlusherQueue; questdb: QuestDbClient; events: FlushEvents; logger: Logger; options: FlusherOptions }) {
    this.#reader = deps.reader;
    this.#questdb = deps.questdb;
    this.#events = deps.events;
    this.#log = deps.logger;
    this.#options = deps.options;
    this.#encoder = new IlpEncoder(deps.options.table);
    this.#backoff = new Backoff(BACKOFF_BASE_MS, deps.options.backoffMaxMs);
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** A large backlog starts a flush before the interval ends (but never cuts a backoff short). */
  wake(): void {
    if (!this.#backingOff) this.#wake?.();
  }

  /** Stops the timer and flushes what it can until `deadline` (epoch ms); the rest stays queued. */
  async stop(deadline: number): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    const loop = this.#loop ?? Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      timer = setTimeout(() => resolve('expired'), Math.max(0, deadline - Date.now()));
    });
    const result = await Promise.race([loop.then(() => 'done' as const), expired]);
    clearTimeout(timer);
    if (result === 'expired') {
      this.#abandoned = true;
      this.#log.warn({ event: 'flush_abandoned' }, 'shutdown deadline reached; unflushed readings stay queued');
    }
    await this.#questdb.close().catch(() => undefined);
  }

  async #run(): Promise<void> {
    let delay = this.#options.intervalMs;
    while (!this.#stopping) {
      await this.#sleep(delay);
      if (this.#stopping) break;
      const outcome = await this.#flushOnce();
      this.#backingOff = outcome === 'failed';
      if (outcome === 'failed') delay = this.#backoff.next();
      else if (outcome === 'full') delay = 0;
      else delay = this.#options.intervalMs;
    }
    // Last flush: drain while QuestDB answers, until the queue is empty or stop() gives up.
    for (
      let outcome = await this.#flushOnce();
      !this.#abandoned && (outcome === 'flushed' || outcome === 'full');
      outcome = await this.#flushOnce()
    ) {
      /* keep draining */
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  async #flushOnce(): Promise<Outcome> {
    const started = performance.now();
    if (!this.#tableReady) {
      try {
        const table = await setUpTable(this.#questdb, this.#options.table, this.#options.retentionDays);
        this.#tableReady = true;
        this.#log.info(
          {
            event: 'table_ready',
            table: this.#options.table,
            created: table.created,
            retentionDays: this.#options.retentionDays,
            timestamp: table.timestampType,
          },
          'QuestDB table ready',
        );
      } catch (error) {
        const schema = error instanceof TableSchemaError;
        return this.#failed(started, 0, `table setup failed: ${(error as Error).message}`, schema ? 'error' : 'warn');
      }
    }
    if (this.#abandoned) return 'failed';
    const batch = this.#readAhead ?? this.#read();
    this.#readAhead = undefined;
    if (batch.records.length === 0) return 'empty';

    // The usual case: the records' text straight into one ILP request, accepted whole.
    if (batch.body !== undefined) {
      const sending = this.#questdb.write(batch.body);
      // While QuestDB works on it, read and encode the batch after this one.
      const last = batch.records.at(-1)!;
      if (batch.full) this.#readAhead = this.#read({ segment: last.segment, lastId: last.id });
      const outcome = await sending;
      if (this.#abandoned) return 'failed';
      if (outcome.ok)
        return this.#completed(
          started,
          batch.records,
          [],
          1,
          batch.records.reduce((sum, r) => sum + r.readings, 0),
        );
      this.#readAhead = undefined;
      if (outcome.kind === 'failed') return this.#writeFailed(started, batch.records, outcome.message);
    }
    return this.#flushRowByRow(started, batch.records);
  }

  /** A batch of records after `from` (the mark by default), encoded unless a record is corrupt. */
  #read(from?: Progress): Batch {
    const records = this.#reader.readOldest(this.#options.batchReadings, this.#options.batchBytes, from);
    let readings = 0;
    let bytes = 0;
    for (const r of records) {
      readings += r.readings;
      bytes += r.bytes;
    }
    const full = readings >= this.#options.batchReadings || bytes >= this.#options.batchBytes;
    try {
      // A copy: the encoder's buffer is reused for the next batch while this one is on the wire.
      return { records, full, body: Buffer.from(this.#encoder.encodeRecords(records.map((r) => r.payload))) };
    } catch (error) {
      if (!(error instanceof RecordCorruptError)) throw error;
      return { records, full, body: undefined };
    }
  }

  /**
   * A record that cannot be decoded, or a row QuestDB refused: decode every reading, set aside
   * what cannot go, and send the rest in chunks.
   */
  async #flushRowByRow(started: number, records: QueueRecord[]): Promise<Outcome> {
    const rows: QueuedReading[] = [];
    const rowRecord: QueueRecord[] = [];
    const deadLetters: DeadLetterInput[] = [];
    for (const record of records) decode(record, rows, rowRecord, deadLetters);

    let start = 0;
    let chunk = rows.length;
    let requests = 0;
    let refused = 0;
    let tableChecked = false;
    while (start < rows.length) {
      const end = Math.min(rows.length, start + chunk);
      const outcome = await this.#questdb.write(this.#encoder.encode(rows, start, end));
      requests += 1;
      if (this.#abandoned) return 'failed';
      if (outcome.ok) {
        start = end;
        chunk = Math.min(rows.length, chunk * 2);
      } else if (outcome.kind === 'rejected' && outcome.line >= 1 && outcome.line <= end - start) {
        if (!tableChecked) {
          // A changed table refuses every row; that is the table's fault, not the readings'.
          const problem = await this.#tableProblem();
          if (problem !== undefined) return this.#failed(started, rows.length, problem, 'error');
          tableChecked = true;
        }
        if (outcome.line === 1) {
          // The first row of the request is the one QuestDB refuses: set it aside and go on.
          const record = rowRecord[start]!;
          deadLetters.push({ receivedMs: record.receivedMs, reason: reasonText(outcome.message), line: formatLine(rows[start]!) });
          start += 1;
          refused += 1;
          chunk = Math.max(1, chunk >> 1);
        } else {
          // Rows before the refused one are fine: send exactly those next.
          chunk = outcome.line - 1;
        }
      } else {
        return this.#writeFailed(started, records, outcome.message);
      }
    }
    return this.#completed(started, records, deadLetters, requests, rows.length - refused);
  }

  #writeFailed(started: number, records: readonly QueueRecord[], message: string): Outcome {
    if (/table|column/i.test(message)) this.#tableReady = false;
    return this.#failed(
      started,
      records.reduce((sum, r) => sum + r.readings, 0),
      message,
      'warn',
    );
  }

  #completed(
    started: number,
    records: readonly QueueRecord[],
    deadLetters: readonly DeadLetterInput[],
    requests: number,
    flushed: number,
  ): Outcome {
    const completion = this.#reader.complete(records, deadLetters);
    this.#backoff.reset();
    const durationMs = Math.round(performance.now() - started);
    this.#events.flushed({ ...completion, flushed, durationMs });
    this.#log.info(
      { event: 'flush', readings: flushed, records: records.length, requests, deadLettered: deadLetters.length, durationMs },
      'flushed readings to QuestDB',
    );
    if (deadLetters.length > 0) {
      this.#log.error(
        { event: 'dead_letters', count: deadLetters.length, reason: deadLetters[0]!.reason },
        'QuestDB refused readings; kept as dead letters',
      );
    }
    const full =
      completion.readings >= this.#options.batchReadings || records.reduce((bytes, r) => bytes + r.bytes, 0) >= this.#options.batchBytes;
    return full ? 'full' : 'flushed';
  }

  async #tableProblem(): Promise<string | undefined> {
    try {
      await checkTable(this.#questdb, this.#options.table);
      return undefined;
    } catch (error) {
      this.#tableReady = false;
      return `QuestDB refused rows and the table check failed: ${(error as Error).message}`;
    }
  }

  #failed(started: number, readings: number, message: string, level: 'warn' | 'error'): Outcome {
    const durationMs = Math.round(performance.now() - started);
    this.#events.failed({ message, readings, durationMs });
    this.#log[level](
      { event: 'flush_failed', error: message, attempt: this.#backoff.attempts + 1 },
      'flush to QuestDB failed; readings stay queued',
    );
    return 'failed';
  }
}

/** Decodes a record into rows; a record that cannot be decoded becomes one dead letter as a whole. */
function decode(record: QueueRecord, rows: QueuedReading[], rowRecord: QueueRecord[], deadLetters: DeadLetterInput[]): void {
  const before = rows.length;
  try {
    decodeRecord(record.payload, rows);
  } catch (error) {
    if (!(error instanceof RecordCorruptError)) throw error;
    rows.length = before;
    deadLetters.push({ receivedMs: record.receivedMs, reason: reasonText(`corrupt queue record: ${error.message}`), line: record.payload });
    return;
  }
  for (let i = before; i < rows.length; i++) rowRecord.push(record);
}

/** QuestDB's reasons span lines; dead letters keep them on one line, bounded. */
function reasonText(text: string): string {
  const line = text.replace(/\s*\n\s*/g, ' ');
  return line.length > MAX_REASON_LENGTH ? `${line.slice(0, MAX_REASON_LENGTH)}…` : line;
}
