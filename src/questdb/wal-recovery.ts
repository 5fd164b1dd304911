import type { Logger } from 'pino';
import type { QuestDbClient } from './questdb-http.js';

/** A WAL table's row of `wal_tables()`. */
export interface WalStatus {
  suspended: boolean;
  /** The last transaction applied to the table. */
  writerTxn: number;
  /** The last transaction the sequencer committed (acknowledged to a writer). */
  sequencerTxn: number;
  errorTag: string;
  errorMessage: string;
}

/** What a recovery did: the transactions it had to skip lost their rows, which a replay must send again. */
export interface WalRecovery {
  /** The table was suspended when the recovery began. */
  wasSuspended: boolean;
  /** Still suspended when the recovery gave up (QuestDB kept failing); try again later. */
  suspended: boolean;
  /** Transactions skipped because QuestDB could not apply them even when asked again. */
  skipped: number[];
  status: WalStatus | undefined;
}

type Sql = Pick<QuestDbClient, 'exec'>;

const POLL_MS = 100;

/** The columns of `wal_tables()` a WalStatus is read from, in `walStatusOf`'s order. */
export const WAL_STATUS_COLUMNS = ['suspended', 'writerTxn', 'sequencerTxn', 'errorTag', 'errorMessage'] as const;

/** A row's WAL_STATUS_COLUMNS as a WalStatus; undefined when they are null (no WAL table, in a LEFT JOIN). */
export function walStatusOf(
  row: readonly [suspended: boolean | null, writerTxn: number | null, sequencerTxn: number | null, errorTag: string, errorMessage: string],
): WalStatus | undefined {
  const [suspended, writerTxn, sequencerTxn, errorTag, errorMessage] = row;
  if (typeof suspended !== 'boolean') return undefined;
  return { suspended, writerTxn: Number(writerTxn), sequencerTxn: Number(sequencerTxn), errorTag, errorMessage };
}

/** The table's WAL state, or undefined when QuestDB knows no WAL table of that name. */
export async function walStatus(questdb: Sql, table: string): Promise<WalStatus | undefined> {
  const answer = await questdb.exec<{ dataset: [boolean, number, number, string, string][] }>(
    `SELECT ${WAL_STATUS_COLUMNS.join(', ')} FROM wal_tables() WHERE name = '${table.replaceAll("'", "''")}'`,
  );
  const row = answer.dataset[0];
  return row === undefined ? undefined : walStatusOf(row);
}

/**
 * Brings a suspended table back. QuestDB suspends a table whose next transaction it cannot apply;
 * after a power cut that is typically a transaction the sequencer made durable while its WAL files
 * were not. The transaction is first retried (`RESUME WAL`); when it fails again it is skipped
 * (`RESUME WAL FROM TXN n+1`), which loses its rows: the caller sends its recent readings again.
 * Every suspension is logged as an error with the transaction, so an operator sees what happened.
 * Gives up (still suspended) after `timeoutMs`. `known`: the table's state just read (with its other
 * state, in one question), so it is not asked again.
 */
export async function recoverWal(
  questdb: Sql,
  table: string,
  log: Logger,
  options: { timeoutMs?: number; known?: WalStatus } = {},
): Promise<WalRecovery> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  const quoted = `"${table.replaceAll('"', '""')}"`;
  const skipped: number[] = [];
  let status = options.known ?? (await walStatus(questdb, table));
  const wasSuspended = status?.suspended === true;
  let retried: number | undefined;
  while (status?.suspended === true && Date.now() < deadline) {
    const failed = status.writerTxn + 1;
    const skip = retried === failed;
    log.error(
      {
        event: 'questdb_wal_suspended',
        table,
        failedTxn: failed,
        writerTxn: status.writerTxn,
        sequencerTxn: status.sequencerTxn,
        errorTag: status.errorTag,
        errorMessage: status.errorMessage,
        action: skip ? 'skip' : 'retry',
      },
      skip
        ? 'QuestDB cannot apply a transaction of the table; resuming after it, its readings are sent again'
        : 'QuestDB suspended the table; resuming it',
    );
    await questdb.exec(skip ? `ALTER TABLE ${quoted} RESUME WAL FROM TXN ${failed + 1}` : `ALTER TABLE ${quoted} RESUME WAL`);
    if (skip) skipped.push(failed);
    retried = failed;
    // A skip marks the failed transaction applied at once: only the next one shows the apply job ran.
    status = await settled(questdb, table, skip ? failed + 1 : failed, deadline);
  }
  return { wasSuspended, suspended: status?.suspended === true, skipped, status };
}

/** Waits until the apply job applied `txn` (or all the sequencer holds, when fewer), suspended again, or the deadline passed. */
async function settled(questdb: Sql, table: string, txn: number, deadline: number): Promise<WalStatus | undefined> {
  for (;;) {
    const status = await walStatus(questdb, table);
    if (status === undefined || status.suspended || status.writerTxn >= Math.min(txn, status.sequencerTxn)) return status;
    if (Date.now() >= deadline) return status;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
