// SQL on the benchmark's QuestDB over its HTTP /exec endpoint.

/**
 * @param {string} url
 * @param {string} query
 * @returns {Promise<{ columns: { name: string, type: string }[], dataset: unknown[][], count: number }>}
 */
export async function sql(url, query) {
  const response = await fetch(`${url}/exec?query=${encodeURIComponent(query)}`);
  const text = await response.text();
  if (!response.ok) throw new Error(`QuestDB ${response.status} for ${query}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

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
 * Waits until QuestDB has applied every committed WAL transaction of `table` (so a count is final);
 * false when it did not within `timeoutMs`.
 * @param {string} url
 * @param {string} table
 * @param {number} timeoutMs
 */
export async function waitWalApplied(url, table, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const row = (await sql(url, `SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '${table}'`)).dataset[0];
    if (row === undefined || row[0] === row[1]) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/**
 * Waits for the WAL, then drops `table` so the runs after it start on an idle QuestDB.
 * @param {string} url
 * @param {string} table
 */
export async function settleAndDrop(url, table) {
  const applied = await waitWalApplied(url, table, 120_000);
  await sql(url, `DROP TABLE IF EXISTS '${table}'`);
  return applied;
}

/** QuestDB's own build string. @param {string} url */
export async function questDbBuild(url) {
  try {
    return String((await sql(url, 'SELECT build()')).dataset[0]?.[0] ?? '');
  } catch {
    return '';
  }
}
