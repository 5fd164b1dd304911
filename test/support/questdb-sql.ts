import { inject } from 'vitest';

export interface SqlAnswer<Row extends unknown[] = unknown[]> {
  columns: { name: string; type: string }[];
  dataset: Row[];
  count: number;
}

/** Runs SQL on the test QuestDB (or another one) over its HTTP endpoint. */
export async function sql<Row extends unknown[] = unknown[]>(query: string, url = inject('questdbUrl')): Promise<SqlAnswer<Row>> {
  const response = await fetch(`${url}/exec?query=${encodeURIComponent(query)}`);
  const text = await response.text();
  if (!response.ok) throw new Error(`QuestDB ${response.status} for ${query}: ${text}`);
  return JSON.parse(text) as SqlAnswer<Row>;
}

/** Waits until `query` (a count) returns at least `expected`; returns the last count. */
export async function waitForCount(query: string, expected: number, timeoutMs = 20_000, url?: string): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let count = -1;
  while (Date.now() < deadline) {
    try {
      count = Number((await sql<[number]>(query, url)).dataset[0]?.[0] ?? 0);
      if (count >= expected) return count;
    } catch {
      /* the table may not exist yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return count;
}

let tables = 0;
/** A table name no other test uses. */
export const uniqueTable = (label: string): string =>
  `t_${label}_${process.pid}_${++tables}_${Math.random().toString(36).slice(2, 8)}`;

/** Waits until QuestDB has applied every committed WAL transaction of the table. */
export async function waitForWalApplied(table: string, timeoutMs = 20_000, url?: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const answer = await sql<[number, number]>(`SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = '${table}'`, url);
    const row = answer.dataset[0];
    if (row !== undefined && row[0] === row[1]) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`WAL of ${table} not applied within ${timeoutMs} ms`);
}

/** Waits until a gateway's queue is empty. */
export async function waitForDrained(gw: { gateway: { queue: { stats(): { readings: number } } } }, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (gw.gateway.queue.stats().readings > 0) {
    if (Date.now() > deadline) throw new Error(`queue not drained within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Rows of a table and distinct values among them, once QuestDB applied its WAL. Tests give every
 * reading a distinct value, so rows = distinct = readings answered 2xx means none lost or doubled.
 */
export async function storedCounts(table: string, url?: string): Promise<{ rows: number; distinct: number }> {
  await waitForWalApplied(table, 20_000, url);
  const rows = (await sql<[number]>(`SELECT count() FROM "${table}"`, url)).dataset[0]![0];
  const distinct = (await sql<[number]>(`SELECT count() FROM (SELECT DISTINCT value FROM "${table}")`, url)).dataset[0]![0];
  return { rows, distinct };
}
