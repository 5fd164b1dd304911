import type { QuestDbClient } from '../../questdb/questdb-http.js';
import { WAL_STATUS_COLUMNS, type WalStatus, walStatusOf } from '../../questdb/wal-recovery.js';

export class TableSchemaError extends Error {
  override name = 'TableSchemaError';
}

interface ColumnsAnswer {
  dataset: [name: string, type: string, designated: boolean, upsertKey: boolean][];
}

interface TableAnswer {
  dataset: [
    id: number,
    walEnabled: boolean,
    dedup: boolean,
    ttlValue: number,
    ttlUnit: string,
    ...wal: [suspended: boolean | null, writerTxn: number | null, sequencerTxn: number | null, errorTag: string, errorMessage: string],
  ][];
}

// `site`: two sites' readings of the same ship, cargo and time are two rows.
const DEDUP_KEYS = ['time', 'ship_id', 'cargo_id', 'site'];
const HOURS_PER_TTL_UNIT: Record<string, number> = { HOUR: 1, DAY: 24, WEEK: 168 };

const ACCEPTED_TYPES: Record<string, readonly string[]> = {
  time: ['TIMESTAMP_NS', 'TIMESTAMP'],
  ship_id: ['SYMBOL', 'VARCHAR', 'STRING'],
  cargo_id: ['SYMBOL', 'VARCHAR', 'STRING'],
  value: ['DOUBLE'],
  site: ['SYMBOL', 'VARCHAR', 'STRING'],
};

/** What setup found, for the startup log. */
export interface TableSetupResult {
  created: boolean;
  timestampType: string;
  /** QuestDB's id of the table: a table dropped and created again (by anyone) has a new one. */
  id: number;
  /** The TTL or deduplication differed from what the gateway needs and was set again. */
  altered: boolean;
  /**
   * The table's WAL state (`wal_tables()`), asked with its other state, when setup changed nothing
   * since: the check of a table already as needed need not ask for it again.
   */
  wal: WalStatus | undefined;
}

/**
 * Creates the readings table when missing, brings its retention TTL (unless `retentionDays` is
 * undefined: a central table's TTL is its operator's) and deduplication to what the gateway needs,
 * and checks that an existing table can take our rows, so a schema mismatch stops the QuestDB sink
 * instead of sending every reading to the dead letters. A table already as needed is not altered:
 * every ALTER rewrites QuestDB's table metadata, which a power cut during the rewrite can damage.
 * Such a table costs two queries, its state (with its WAL state) and its columns: the sink checks it
 * every few seconds while it keeps readings for replay.
 */
export async function setUpTable(questdb: QuestDbClient, table: string, retentionDays: number | undefined): Promise<TableSetupResult> {
  let state = await tableState(questdb, table);
  const existed = state !== undefined;
  const ttl = retentionDays === undefined || retentionDays === 0 ? '' : ` TTL ${retentionDays} DAYS`;
  if (state === undefined) {
    await questdb.exec(
      `CREATE TABLE IF NOT EXISTS "${table}" (time TIMESTAMP_NS, ship_id SYMBOL, cargo_id SYMBOL, value DOUBLE, site SYMBOL)` +
        ` TIMESTAMP(time) PARTITION BY DAY${ttl} WAL DEDUP UPSERT KEYS(${DEDUP_KEYS.join(', ')})`,
    );
    state = await tableState(questdb, table);
  }
  if (state === undefined) throw new TableSchemaError(`table ${table} does not exist`);
  let columns = await tableColumns(questdb, table);
  let altered = false;
  // A table of a release before sites gains the column in place (its rows keep a null site).
  if (existed && !columns.has('site')) {
    await questdb.exec(`ALTER TABLE "${table}" ADD COLUMN site SYMBOL`);
    columns = await tableColumns(questdb, table);
    altered = true;
  }
  const { timestampType, dedupsOnReadingKey } = describeTable(table, state, columns);
  if (retentionDays !== undefined && ttlHours(state) !== retentionDays * 24) {
    await questdb.exec(`ALTER TABLE "${table}" SET TTL ${retentionDays} DAYS`);
    altered = true;
  }
  if (!state.dedup || !dedupsOnReadingKey) {
    await questdb.exec(`ALTER TABLE "${table}" DEDUP ENABLE UPSERT KEYS(${DEDUP_KEYS.join(', ')})`);
    altered = true;
  }
  return {
    created: !existed,
    timestampType,
    id: state.id,
    altered: altered && existed,
    wal: existed && !altered ? state.wal : undefined,
  };
}

/** The table's TTL in hours (0: none); NaN for units a number of days cannot equal (months, years). */
function ttlHours(state: TableState): number {
  return state.ttlValue === 0 ? 0 : state.ttlValue * (HOURS_PER_TTL_UNIT[state.ttlUnit] ?? Number.NaN);
}

/** Throws TableSchemaError unless the table can store readings exactly; returns the timestamp type. */
export async function checkTable(questdb: QuestDbClient, table: string): Promise<string> {
  const state = await tableState(questdb, table);
  if (state === undefined) throw new TableSchemaError(`table ${table} does not exist`);
  return describeTable(table, state, await tableColumns(questdb, table)).timestampType;
}

type Column = { type: string; designated: boolean; upsertKey: boolean };

/** Throws TableSchemaError unless the table can store readings exactly; its timestamp type, and whether its upsert keys are exactly DEDUP_KEYS. */
function describeTable(
  table: string,
  state: TableState,
  columns: ReadonlyMap<string, Column>,
): { timestampType: string; dedupsOnReadingKey: boolean } {
  if (!state.walEnabled) throw new TableSchemaError(`table ${table} is not a WAL table; deduplication of replays needs WAL`);
  for (const [name, types] of Object.entries(ACCEPTED_TYPES)) {
    const column = columns.get(name);
    if (column === undefined || !types.includes(column.type)) {
      throw new TableSchemaError(
        `table ${table} has ${column === undefined ? `no column ${name}` : `column ${name} of type ${column.type}`}; expected ${types.join(' or ')}`,
      );
    }
  }
  const time = columns.get('time')!;
  if (!time.designated) throw new TableSchemaError(`table ${table}: column time is not the designated timestamp`);
  const upsertKeys = [...columns].filter(([, column]) => column.upsertKey).map(([name]) => name);
  const dedupsOnReadingKey = upsertKeys.length === DEDUP_KEYS.length && DEDUP_KEYS.every((key) => upsertKeys.includes(key));
  return { timestampType: time.type, dedupsOnReadingKey };
}

async function tableColumns(questdb: QuestDbClient, table: string): Promise<Map<string, Column>> {
  const answer = await questdb.exec<ColumnsAnswer>(`SELECT "column", type, designated, upsertKey FROM table_columns('${table}')`);
  return new Map(answer.dataset.map(([name, type, designated, upsertKey]) => [name, { type, designated, upsertKey }]));
}

interface TableState {
  id: number;
  walEnabled: boolean;
  dedup: boolean;
  ttlValue: number;
  ttlUnit: string;
  wal: WalStatus | undefined;
}

async function tableState(questdb: QuestDbClient, table: string): Promise<TableState | undefined> {
  // wal_tables() in the same question: one request fewer in each check of the table.
  const answer = await questdb.exec<TableAnswer>(
    `SELECT t.id, t.walEnabled, t.dedup, t.ttlValue, t.ttlUnit, ${WAL_STATUS_COLUMNS.map((c) => `w.${c}`).join(', ')}` +
      ` FROM tables() t LEFT JOIN wal_tables() w ON (w.name = t.table_name) WHERE t.table_name = '${table}'`,
  );
  const row = answer.dataset[0];
  if (row === undefined) return undefined;
  const [id, walEnabled, dedup, ttlValue, ttlUnit, ...wal] = row;
  return { id, walEnabled, dedup, ttlValue, ttlUnit, wal: walStatusOf(wal) };
}
