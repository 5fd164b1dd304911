// SQL on a QuestDB over its HTTP /exec endpoint, for the tests, the fault runs and the benchmarks.
// QuestDB applies WAL transactions after it acknowledges them, so a count is only final once the
// table's writer has caught up with its sequencer: the waits below check exactly that.

const POLL_MS = 50;

/**
 * @template {unknown[]} [Row=unknown[]]
 * @typedef {{ columns: { name: string, type: string }[], dataset: Row[], count: number }} SqlAnswer
 */

/**
 * Runs `query`; a refusal throws with QuestDB's message.
 * @template {unknown[]} [Row=unknown[]]
 * @param {string} url
 * @param {string} query
 * @returns {Promise<SqlAnswer<Row>>}
 */
export async function sql(url, query) {
  const response = await fetch(`${url}/exec?query=${encodeURIComponent(query)}`);
  const text = await response.text();
  if (!response.ok) throw new Error(`QuestDB ${response.status} for ${query}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

let tables = 0;
/** A table name no other test or run uses. @param {string} label */
export const uniqueTable = (label) => `t_${label}_${process.pid}_${++tables}_${Math.random().toString(36).slice(2, 8)}`;

/**
 * Rows of `table`, or undefined while it does not exist yet.
 * @param {string} url
 * @param {string} table
 */
export async function rowCount(url, table) {
  try {
    return Number((await sql(url, `SELECT count() FROM '${table}'`)).dataset[0]?.[0] ?? 0);
  } catch {
    return undefined;
  }
}

/**
 * Waits until `query` (a count) returns at least `expected`; returns the last count (-1 when the
 * query never answered, e.g. the table was never created).
 * @param {string} url
 * @param {string} query
 * @param {number} expected
 * @param {number} [timeoutMs]
 */
export async function waitForCount(url, query, expected, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  let count = -1;
  while (Date.now() < deadline) {
    try {
      count = Number((await sql(url, query)).dataset[0]?.[0] ?? 0);
      if (count >= expected) return count;
    } catch {
      // The table may not exist yet.
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  return count;
}

/**
 * Waits until QuestDB has applied every committed WAL transaction of `table`; false when it did not
 * within `timeoutMs` (or the table does not exist).
 * @param {string} url
 * @param {string} table
 * @param {number} [timeoutMs]
 */
export async function walApplied(url, table, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const row = (await sql(url, `SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '${table}'`)).dataset[0];
    if (row !== undefined && row[0] === row[1]) return true;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  return false;
}

/**
 * As walApplied, but throws when the WAL was not applied in time.
 * @param {string} url
 * @param {string} table
 * @param {number} [timeoutMs]
 */
export async function waitForWalApplied(url, table, timeoutMs = 20_000) {
  if (await walApplied(url, table, timeoutMs)) return;
  // The table's WAL state says why (a suspended table, a transaction QuestDB cannot read).
  const state = (await sql(url, `SELECT * FROM wal_tables() WHERE name = '${table}'`)).dataset;
  throw new Error(`WAL of ${table} not applied within ${timeoutMs} ms: ${JSON.stringify(state)}`);
}

/**
 * Rows of a table and distinct values among them, once QuestDB applied its WAL. Load generators give
 * every reading a distinct value, so rows = distinct = readings answered 2xx means none lost or doubled.
 * @param {string} url
 * @param {string} table
 * @returns {Promise<{ rows: number, distinct: number }>}
 */
export async function storedCounts(url, table) {
  await waitForWalApplied(url, table);
  const rows = Number((await sql(url, `SELECT count() FROM "${table}"`)).dataset[0]?.[0]);
  const distinct = Number((await sql(url, `SELECT count() FROM (SELECT DISTINCT value FROM "${table}")`)).dataset[0]?.[0]);
  return { rows, distinct };
}

/**
 * Waits for the WAL of `table` (when it exists), then drops it so later runs start on an idle
 * QuestDB; false when the WAL was not applied within two minutes.
 * @param {string} url
 * @param {string} table
 */
export async function settleAndDrop(url, table) {
  const exists = (await sql(url, `SELECT count() FROM tables() WHERE table_name = '${table}'`)).dataset[0]?.[0] !== 0;
  const applied = !exists || (await walApplied(url, table, 120_000));
  await sql(url, `DROP TABLE IF EXISTS '${table}'`);
  return applied;
}

/** QuestDB's own build string, or '' when it does not say. @param {string} url */
export async function questDbBuild(url) {
  try {
    return String((await sql(url, 'SELECT build()')).dataset[0]?.[0] ?? '');
  } catch {
    return '';
  }
}
