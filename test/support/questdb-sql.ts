// The SQL helpers of scripts/lib/questdb-sql.mjs bound to the suite's QuestDB (another one's URL
// may be passed last), and the wait for an in-process gateway's queue to reach it.
import { inject } from 'vitest';
import * as questdb from '../../scripts/lib/questdb-sql.mjs';

export type { SqlAnswer } from '../../scripts/lib/questdb-sql.mjs';
export { uniqueTable } from '../../scripts/lib/questdb-sql.mjs';

/** Runs SQL on the test QuestDB (or the one at `url`). */
export const sql = <Row extends unknown[] = unknown[]>(query: string, url = inject('questdbUrl')) => questdb.sql<Row>(url, query);

/** Waits until `query` (a count) returns at least `expected`; returns the last count. */
export const waitForCount = (query: string, expected: number, timeoutMs = 20_000, url = inject('questdbUrl')) =>
  questdb.waitForCount(url, query, expected, timeoutMs);

/** Waits until QuestDB has applied every committed WAL transaction of the table. */
export const waitForWalApplied = (table: string, timeoutMs = 20_000, url = inject('questdbUrl')) =>
  questdb.waitForWalApplied(url, table, timeoutMs);

/** Rows of a table and distinct values among them, once QuestDB applied its WAL. */
export const storedCounts = (table: string, url = inject('questdbUrl')) => questdb.storedCounts(url, table);

/** Waits until a gateway's queue is empty. */
export async function waitForDrained(gw: { gateway: { queue: { stats(): { readings: number } } } }, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (gw.gateway.queue.stats().readings > 0) {
    if (Date.now() > deadline) throw new Error(`queue not drained within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
