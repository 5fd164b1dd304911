import type { Logger } from 'pino';
import { type FailureLevel, QuestDbError, type QuestDbClient } from '../../questdb/questdb-http.js';
import type { DeadLetterInput, QueueRecord } from '../../queue/queue-reader.js';
import { RecordCorruptError, decodeRecord, type QueuedReading } from '../../queue/record-codec.js';
import { recoverWal } from '../../questdb/wal-recovery.js';
import { corruptRecordLetter, readingLetter, reasonText } from '../dead-letter-reason.js';
import type { Delivery, Ready, Recovery, SinkTarget } from '../sink.js';
import { IlpEncoder } from './ilp-encoder.js';
import { TableSchemaError, checkTable, setUpTable } from './table-setup.js';

export interface QuestDbTargetOptions {
  /** The sink's name: `questdb` for the local server, `remote-questdb` for a central one. */
  name: string;
  /** The server's address as logs and /status show it, without credentials. */
  describe: string;
  table: string;
  /** The table's TTL, applied at every start; undefined leaves it to the server's operator (a central table). */
  retentionDays: number | undefined;
  /** This gateway's site: the `site` of readings queued without one. */
  site: string;
  /**
   * Resume the table when QuestDB suspended it: the local QuestDB's table, which shares the site's
   * power; a central table is its operator's to mend.
   */
  resumesWal: boolean;
}

/**
 * A QuestDB table over ILP/HTTP: the table is set up (and checked) before the first write, a batch
 * goes as one request that QuestDB applies whole, and rows QuestDB refuses for their content are
 * found by bisection and become dead letters while every other row is sent once.
 */
export class QuestDbTarget implements SinkTarget {
  readonly name: string;
  readonly describe: string;
  readonly #questdb: QuestDbClient;
  readonly #log: Logger;
  readonly #options: QuestDbTargetOptions;
  readonly #encoder: IlpEncoder;
  #tableReady = false;
  /** The table's id in QuestDB when last checked: another id is a table dropped and created anew. */
  #tableId: number | undefined;

  constructor(deps: { questdb: QuestDbClient; logger: Logger; options: QuestDbTargetOptions }) {
    this.name = deps.options.name;
    this.describe = deps.options.describe;
    this.#questdb = deps.questdb;
    this.#log = deps.logger;
    this.#options = deps.options;
    this.#encoder = new IlpEncoder(deps.options.table, deps.options.site);
  }

  async ready(): Promise<Ready> {
    if (this.#tableReady) return { ok: true };
    try {
      const table = await setUpTable(this.#questdb, this.#options.table, this.#options.retentionDays);
      this.#tableReady = true;
      this.#log.info(
        {
          event: 'table_ready',
          sink: this.name,
          table: this.#options.table,
          created: table.created,
          retentionDays: this.#options.retentionDays,
          timestamp: table.timestampType,
        },
        'QuestDB table ready',
      );
      return { ok: true };
    } catch (error) {
      const level = error instanceof TableSchemaError || (error instanceof QuestDbError && error.level === 'error') ? 'error' : 'warn';
      return { ok: false, message: `table setup failed: ${(error as Error).message}`, level };
    }
  }

  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    // The usual case: the records' text straight into one ILP request, accepted whole.
    let body: Buffer | undefined;
    try {
      body = this.#encoder.encodeRecords(records);
    } catch (error) {
      if (!(error instanceof RecordCorruptError)) throw error;
    }
    if (body !== undefined) {
      const outcome = await this.#questdb.write(body);
      if (outcome.ok) return { ok: true, requests: 1, deadLetters: [] };
      if (outcome.kind === 'failed') return this.#writeFailed(outcome.message, outcome.level, outcome.retryAfterMs);
    }
    return this.#deliverRowByRow(records);
  }

  /**
   * Checks that the table is the one written to before: a table dropped (and maybe made anew)
   * since may have taken acknowledged rows with it, which a replay sends again. Resumes the table
   * when QuestDB suspended it (see wal-recovery), for the local QuestDB.
   */
  async recover(): Promise<Recovery> {
    const table = this.#options.table;
    try {
      const id = await tableId(this.#questdb, table);
      if (id === undefined) {
        this.#tableReady = false;
        return { ok: false, message: `table ${table} does not exist (dropped?); it is created again`, level: 'warn' };
      }
      const replaced = this.#tableId !== undefined && id !== this.#tableId;
      this.#tableId = id;
      if (replaced) this.#log.warn({ event: 'table_replaced', sink: this.name, table }, `table ${table} was dropped and created again`);
      if (!this.#options.resumesWal) return { ok: true, resumed: replaced };
      const recovery = await recoverWal(this.#questdb, table, this.#log);
      if (recovery.suspended)
        return { ok: false, message: `table ${table} stays suspended: ${recovery.status?.errorMessage}`, level: 'error' };
      return { ok: true, resumed: recovery.wasSuspended || replaced };
    } catch (error) {
      return { ok: false, message: `table recovery failed: ${(error as Error).message}`, level: 'warn' };
    }
  }

  close(): Promise<void> {
    return this.#questdb.close();
  }

  /**
   * A record that cannot be decoded, or a row QuestDB refused: decode every reading, set aside
   * what cannot go, and send the rest in chunks.
   */
  async #deliverRowByRow(records: readonly QueueRecord[]): Promise<Delivery> {
    const rows: QueuedReading[] = [];
    const rowRecord: QueueRecord[] = [];
    const deadLetters: DeadLetterInput[] = [];
    for (const record of records) decode(record, rows, rowRecord, deadLetters);

    let start = 0;
    let chunk = rows.length;
    let requests = 0;
    let tableChecked = false;
    const sites = rowRecord.map((r) => r.site);
    while (start < rows.length) {
      const end = Math.min(rows.length, start + chunk);
      const outcome = await this.#questdb.write(this.#encoder.encode(rows, start, end, sites));
      requests += 1;
      if (outcome.ok) {
        start = end;
        chunk = Math.min(rows.length, chunk * 2);
      } else if (outcome.kind === 'rejected' && outcome.line >= 1 && outcome.line <= end - start) {
        if (!tableChecked) {
          // A changed table refuses every row; that is the table's fault, not the readings'.
          const problem = await this.#tableProblem();
          if (problem !== undefined) return { ok: false, message: problem, level: 'error' };
          tableChecked = true;
        }
        if (outcome.line === 1) {
          // The first row of the request is the one QuestDB refuses: set it aside and go on.
          const record = rowRecord[start]!;
          deadLetters.push(readingLetter(record, rows[start]!, reasonText(outcome.message)));
          start += 1;
          chunk = Math.max(1, chunk >> 1);
        } else {
          // Rows before the refused one are fine: send exactly those next.
          chunk = outcome.line - 1;
        }
      } else {
        return outcome.kind === 'failed'
          ? this.#writeFailed(outcome.message, outcome.level, outcome.retryAfterMs)
          : this.#writeFailed(outcome.message, 'warn');
      }
    }
    return { ok: true, requests, deadLetters };
  }

  /** Refused credentials and certificates are the operator's to fix (`error`); a 429/503 pause is kept. */
  #writeFailed(message: string, level: FailureLevel, retryAfterMs?: number): Delivery {
    if (/table|column/i.test(message)) this.#tableReady = false;
    return retryAfterMs === undefined ? { ok: false, message, level } : { ok: false, message, level, retryAfterMs };
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
}

/** The table's id in QuestDB, or undefined when there is no such table. */
async function tableId(questdb: QuestDbClient, table: string): Promise<number | undefined> {
  const answer = await questdb.exec<{ dataset: [number][] }>(`SELECT id FROM tables() WHERE table_name = '${table}'`);
  return answer.dataset[0]?.[0];
}

/** Decodes a record into rows; a record that cannot be decoded becomes one dead letter as a whole. */
function decode(record: QueueRecord, rows: QueuedReading[], rowRecord: QueueRecord[], deadLetters: DeadLetterInput[]): void {
  const before = rows.length;
  try {
    decodeRecord(record.payload, rows);
  } catch (error) {
    if (!(error instanceof RecordCorruptError)) throw error;
    rows.length = before;
    deadLetters.push(corruptRecordLetter(record, error));
    return;
  }
  for (let i = before; i < rows.length; i++) rowRecord.push(record);
}
