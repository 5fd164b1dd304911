import type { QuestDbClient } from '../../questdb/questdb-http.js';

export class TableSchemaError extends Error {
  override name = 'TableSchemaError';
}

interface ColumnsAnswer {
  dataset: [name: string, type: string, designated: boolean][];
}

const ACCEPTED_TYPES: Record<string, readonly string[]> = {
  time: ['TIMESTAMP_NS', 'TIMESTAMP'],
  ship_id: ['SYMBOL', 'VARCHAR', 'STRING'],
  cargo_id: ['SYMBOL', 'VARCHAR', 'STRING'],
  value: ['DOUBLE'],
};

/** What setup found, for the startup log. */
export interface TableSetupResult {
  created: boolean;
  timestampType: string;
}

/**
 * Creates the readings table when missing, applies the retention TTL and deduplication on every
 * start, and checks that an existing table can take our rows, so a schema mismatch stops the
 * QuestDB sink instead of sending every reading to the dead letters.
 */
export async function setUpTable(questdb: QuestDbClient, table: string, retentionDays: number): Promise<TableSetupResult> {
  const existed = (await walEnabled(questdb, table)) !== undefined;
  const ttl = retentionDays === 0 ? '' : ` TTL ${retentionDays} DAYS`;
  await questdb.exec(
    `CREATE TABLE IF NOT EXISTS "${table}" (time TIMESTAMP_NS, ship_id SYMBOL, cargo_id SYMBOL, value DOUBLE)` +
      ` TIMESTAMP(time) PARTITION BY DAY${ttl} WAL DEDUP UPSERT KEYS(time, ship_id, cargo_id)`,
  );
  const timestampType = await checkTable(questdb, table);
  await questdb.exec(`ALTER TABLE "${table}" SET TTL ${retentionDays} DAYS`);
  await questdb.exec(`ALTER TABLE "${table}" DEDUP ENABLE UPSERT KEYS(time, ship_id, cargo_id)`);
  return { created: !existed, timestampType };
}

/** Throws TableSchemaError unless the table can store readings exactly; returns the timestamp type. */
export async function checkTable(questdb: QuestDbClient, table: string): Promise<string> {
  const wal = await walEnabled(questdb, table);
  if (wal === undefined) throw new TableSchemaError(`table ${table} does not exist`);
  if (!wal) throw new TableSchemaError(`table ${table} is not a WAL table; deduplication of replays needs WAL`);
  const columns = await questdb.exec<ColumnsAnswer>(`SELECT "column", type, designated FROM table_columns('${table}')`);
  const byName = new Map(columns.dataset.map(([name, type, designated]) => [name, { type, designated }]));
  for (const [name, types] of Object.entries(ACCEPTED_TYPES)) {
    const column = byName.get(name);
    if (column === undefined || !types.includes(column.type)) {
      throw new TableSchemaError(
        `table ${table} has ${column === undefined ? `no column ${name}` : `column ${name} of type ${column.type}`}; expected ${types.join(' or ')}`,
      );
    }
  }
  const time = byName.get('time')!;
  if (!time.designated) throw new TableSchemaError(`table ${table}: column time is not the designated timestamp`);
  return time.type;
}

async function walEnabled(questdb: QuestDbClient, table: string): Promise<boolean | undefined> {
  const answer = await questdb.exec<{ dataset: [boolean][] }>(`SELECT walEnabled FROM tables() WHERE table_name = '${table}'`);
  return answer.dataset[0]?.[0];
}
