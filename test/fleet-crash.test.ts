import { afterAll, describe, expect, inject, it } from 'vitest';
import { runCrashConsistency } from '../scripts/lib/crash-consistency.mjs';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { sql, storedCounts, uniqueTable, waitForDrained } from './support/questdb-sql.js';

// kill -9 rounds of a site gateway with two sinks: its local QuestDB table and the upstream sink to
// a central gateway. The rounds check the local table against every answer; the central table must
// then hold exactly the same readings (a replay after a kill lands on the same keys).

const centrals: TestGateway[] = [];
afterAll(async () => {
  for (const central of centrals) await central.stop();
});

const count = async (query: string): Promise<number> => Number((await sql(query)).dataset[0]?.[0]);

describe.each(['process-crash', 'power-loss'] as const)('kill -9 of a site with an upstream sink (%s)', (durability) => {
  it('keeps every answered reading exactly once locally and centrally', async () => {
    const central = await startTestGateway();
    centrals.push(central);
    const siteTable = uniqueTable('crash_site');
    const report = await runCrashConsistency({
      rounds: 3,
      durability,
      questdbUrl: inject('questdbUrl'),
      bundlePath: inject('bundlePath'),
      clients: 4,
      table: siteTable,
      sinkEnv: { UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`, UPSTREAM_API_KEY: TEST_KEY, FLUSH_BACKOFF_MAX_MS: '500' },
    });
    const summary = JSON.stringify({ ...report, missing: report.missing.slice(0, 5), strangers: report.strangers.slice(0, 5) });
    expect(report.ok, summary).toBeGreaterThan(100);
    expect({ missing: report.missing, forbidden: report.forbidden, strangers: report.strangers, duplicates: report.duplicates }).toEqual({
      missing: [],
      forbidden: [],
      strangers: [],
      duplicates: 0,
    });

    // The site drained its upstream backlog before it stopped: all of it is in the central queue.
    await waitForDrained(central);
    const local = await storedCounts(siteTable);
    expect(await storedCounts(central.table)).toEqual(local);
    const keys = (table: string) => `SELECT count() FROM (SELECT DISTINCT time, ship_id, cargo_id FROM '${table}')`;
    expect(await count(keys(central.table))).toBe(local.rows);
    const onlyIn = (a: string, b: string) =>
      `SELECT count() FROM '${a}' x LEFT JOIN '${b}' y ON (time, ship_id, cargo_id) WHERE y.value = NULL`;
    expect(await count(onlyIn(central.table, siteTable))).toBe(0);
    expect(await count(onlyIn(siteTable, central.table))).toBe(0);
  }, 120_000);
});
