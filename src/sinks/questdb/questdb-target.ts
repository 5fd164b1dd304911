import type { Logger } from 'pino';
import { type FailureLevel, QuestDbError, type QuestDbClient } from '../../questdb/questdb-http.js';
import { isOwnRecord, type DeadLetterInput, type QueueRecord } from '../../queue/queue-reader.js';
import { RecordCorruptError, decodeRecord, type QueuedReading } from '../../queue/record-codec.js';
import { recoverWal, type WalStatus } from '../../questdb/wal-recovery.js';
import { corruptRecordLetter, questDbRowReason, readingLetter, reasonText, recordLetter } from '../dead-letter-reason.js';
import { CLAIMS_TABLE, type RemoteClaim } from '../remote-questdb/remote-site-claims.js';
import type { Delivery, Ready, Recovery, SinkTarget } from '../sink.js';
import { withoutExpired } from './expired-readings.js';
import { IlpEncoder } from './ilp-encoder.js';
import { TableSchemaError, checkTable, setUpTable, type TableSetupResult } from './table-setup.js';

export interface QuestDbTargetOptions {
  /** The sink's name: `questdb` for the local server, `remote-questdb` for a central one. */
  name: string;
  /** The server's address as logs and /status show it, without credentials. */
  describe: string;
  table: string;
  /**
   * The table's TTL, applied at every start; undefined leaves it to the server's operator (a central
   * table). Readings older than it are not sent (QuestDB would drop them at once) but counted as expired.
   */
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
  /** QuestDB's id of the table this sink set up and writes to. */
  #tableId: number | undefined;

  /** A remote QuestDB's site claims (remote-questdb/remote-site-claims.ts); undefined for the local one. */
  readonly #claims: { check(site: string): Promise<RemoteClaim> } | undefined;

  constructor(deps: {
    questdb: QuestDbClient;
    logger: Logger;
    options: QuestDbTargetOptions;
    claims?: { check(site: string): Promise<RemoteClaim> };
  }) {
    this.name = deps.options.name;
    this.describe = deps.options.describe;
    this.#questdb = deps.questdb;
    this.#claims = deps.claims;
    this.#log = deps.logger;
    this.#options = deps.options;
    this.#encoder = new IlpEncoder(deps.options.table, deps.options.site);
  }

  async ready(): Promise<Ready> {
    if (this.#tableReady) return { ok: true };
    try {
      const table = await setUpTable(this.#questdb, this.#options.table, this.#options.retentionDays);
      // Made again after a write found it gone: what follows goes on connections that never had the old table open.
      if (this.#tableId !== undefined && table.id !== this.#tableId) await this.#questdb.reconnect();
      this.#tableReady = true;
      this.#tableId = table.id;
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

  async deliver(batch: readonly QueueRecord[]): Promise<Delivery> {
    const claimed = this.#claims === undefined ? { records: batch, deadLetters: [] } : await this.#claimed(batch, this.#claims);
    if ('failed' in claimed) return claimed.failed;
    // Readings older than the table's TTL would be dropped by QuestDB at once: not sent, counted.
    const { records, expired } = this.#keepable(claimed.records);
    if (records.length === 0) return { ok: true, requests: 0, deadLetters: claimed.deadLetters, expired };
    const delivery = await this.#deliver(records);
    if (!delivery.ok) return delivery;
    const deadLetters = claimed.deadLetters.length === 0 ? delivery.deadLetters : [...claimed.deadLetters, ...delivery.deadLetters];
    return expired > 0 ? { ...delivery, deadLetters, expired } : { ...delivery, deadLetters };
  }

  /**
   * This gateway's own readings go only under a site it owns at the remote QuestDB: those of its
   * current name wait (the delivery fails, nothing dead-lettered) while another gateway owns it;
   * those of a name it had before a rename, which it cannot be renamed out of any more, are set
   * aside as dead letters, to re-queue once the claim is released.
   */
  async #claimed(
    records: readonly QueueRecord[],
    claims: { check(site: string): Promise<RemoteClaim> },
  ): Promise<{ records: readonly QueueRecord[]; deadLetters: DeadLetterInput[] } | { failed: Delivery }> {
    const current = this.#options.site;
    const refused = new Map<string, string>();
    const names = new Set<string>();
    for (const record of records) if (isOwnRecord(record)) names.add(record.site ?? current);
    for (const name of names) {
      let claim: RemoteClaim;
      try {
        claim = await claims.check(name);
      } catch (error) {
        // A refused token or certificate stays the operator's to fix, as for the readings themselves.
        const level = error instanceof QuestDbError ? error.level : 'warn';
        return { failed: { ok: false, message: `site claim not checked: ${reasonText((error as Error).message)}`, level } };
      }
      if (!claim.owned) refused.set(name, claim.owner);
    }
    if (refused.size === 0) return { records, deadLetters: [] };
    const owner = refused.get(current);
    if (owner !== undefined) {
      return {
        failed: {
          ok: false,
          level: 'error',
          message:
            `the remote QuestDB gives site ${JSON.stringify(current)} to another gateway (instance ${owner}, the first claim in table ${CLAIMS_TABLE}); ` +
            'readings of this site stay queued until this gateway is renamed (SITE_ID) or the claim is released there',
        },
      };
    }
    const kept: QueueRecord[] = [];
    const deadLetters: DeadLetterInput[] = [];
    for (const record of records) {
      const name = record.site ?? current;
      const other = isOwnRecord(record) ? refused.get(name) : undefined;
      if (other === undefined) kept.push(record);
      else {
        deadLetters.push(
          recordLetter(
            record,
            `the remote QuestDB gives site ${JSON.stringify(name)} to another gateway (instance ${other}); answered as it before this gateway was renamed: re-queue once the claim is released`,
          ),
        );
      }
    }
    return { records: kept, deadLetters };
  }

  #keepable(records: readonly QueueRecord[]): { records: readonly QueueRecord[]; expired: number } {
    const days = this.#options.retentionDays;
    if (days === undefined || days === 0) return { records, expired: 0 };
    return withoutExpired(records, `${Math.floor(Date.now() / 1000) - days * 86_400}000000000`);
  }

  async #deliver(records: readonly QueueRecord[]): Promise<Delivery> {
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
   * Checks the table (see #checkTable) and resumes it when QuestDB suspended it (see wal-recovery),
   * for the local QuestDB only.
   * Either may have lost what QuestDB acknowledged: `resumed` asks for the kept readings again.
   */
  async recover(): Promise<Recovery> {
    try {
      const table = await this.#checkTable();
      if (!table.ok) return { ok: false, message: table.message, level: 'error' };
      if (!this.#options.resumesWal) return { ok: true, resumed: table.replaced };
      const recovery = await recoverWal(this.#questdb, this.#options.table, this.#log, table.wal === undefined ? {} : { known: table.wal });
      if (recovery.suspended)
        return { ok: false, message: `table ${this.#options.table} stays suspended: ${recovery.status?.errorMessage}`, level: 'error' };
      return { ok: true, resumed: recovery.wasSuspended || table.replaced };
    } catch (error) {
      return { ok: false, message: `table recovery failed: ${(error as Error).message}`, level: 'warn' };
    }
  }

  /**
   * The table the sink writes to is still the one it set up, as it needs it: designated timestamp
   * `time`, the column types, DEDUP UPSERT KEYS and the TTL. A missing table is created again; a
   * changed TTL or deduplication is set again; a table dropped and created by someone else (the
   * next ILP write, where QuestDB creates tables by itself: `timestamp` for `time`, no
   * deduplication, no TTL) is taken over if it can store readings exactly, and refused otherwise,
   * which stops the sink until an operator drops it. The readings delivered to a dropped table went
   * with it: `replaced` asks for what the sink keeps to be sent again.
   */
  async #checkTable(): Promise<{ ok: true; replaced: boolean; wal: WalStatus | undefined } | { ok: false; message: string }> {
    const name = this.#options.table;
    let table: TableSetupResult;
    try {
      table = await setUpTable(this.#questdb, name, this.#options.retentionDays);
    } catch (error) {
      if (!(error instanceof TableSchemaError)) throw error;
      this.#tableReady = false;
      return {
        ok: false,
        message: `table ${name} is not the table the gateway set up and cannot hold readings exactly (${error.message}); was it dropped and created again by an ILP write? Drop it: the gateway creates it again and sends the readings it keeps again`,
      };
    }
    const replaced = table.created || table.id !== this.#tableId;
    if (replaced) {
      // The kept readings go again on connections that never had the old table open.
      await this.#questdb.reconnect();
      this.#log.warn(
        { event: 'table_replaced', sink: this.name, table: name, created: table.created, timestamp: table.timestampType },
        table.created
          ? `table ${name} was dropped; created again, and the readings kept are sent again`
          : `table ${name} was dropped and created again; it can hold readings exactly, and the readings kept are sent again`,
      );
    } else if (table.altered) {
      this.#log.warn(
        { event: 'table_altered', sink: this.name, table: name },
        `the TTL or deduplication of table ${name} had changed; set again`,
      );
    }
    this.#tableId = table.id;
    return { ok: true, replaced, wal: table.wal };
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
          deadLetters.push(readingLetter(record, rows[start]!, questDbRowReason(outcome.message)));
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
