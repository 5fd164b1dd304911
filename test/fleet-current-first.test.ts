import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/lib/ports.mjs';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, killAll, spawnGateway, type GatewayProcess } from './support/process.js';
import { sql, storedCounts, waitForCount } from './support/questdb-sql.js';
import { waitUntil } from './support/wait.js';

// Two real gateway processes, site → centre, the centre down while the site takes readings: when it
// comes back, the site's current-first upstream sink sends the newest readings first, within its
// bandwidth budget, and backfills the rest; /status shows the budget and the catch-up time; in the
// end the centre has every reading exactly once.

const processes: GatewayProcess[] = [];
afterAll(async () => {
  await killAll(processes);
});

async function spawn(env: Record<string, string>): Promise<GatewayProcess> {
  const p = await spawnGateway({ DURABILITY: 'process-crash', FLUSH_INTERVAL_MS: '100', FLUSH_BACKOFF_MAX_MS: '300', ...env });
  processes.push(p);
  return p;
}

interface SinkStatus {
  name: string;
  backlog: number;
  budgetBytesPerS?: number;
  catchUpSeconds: number | null;
  sentBytes: number;
}

async function upstream(site: GatewayProcess): Promise<SinkStatus> {
  const status = (await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { sinks: SinkStatus[] };
  return status.sinks.find((s) => s.name === 'upstream')!;
}

const READINGS = 1200;

describe('current first after an outage', () => {
  it('makes the centre current with the newest readings first, then backfills within the budget, every reading once', async () => {
    const centralEnv = gatewayEnv('cf-central', { PORT: String(await freePort()) });
    const siteEnv = gatewayEnv('cf-site', {
      PORT: String(await freePort()),
      SITE_ID: 'cf-site',
      UPSTREAM_URL: `http://127.0.0.1:${centralEnv.PORT}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
      UPSTREAM_ORDER: 'current_first',
      UPSTREAM_BATCH_READINGS: '100',
      // About a batch a second: the backfill takes seconds, the first batch none.
      UPSTREAM_MAX_BYTES_PER_S: '4KiB',
    });
    const site = await spawn(siteEnv);
    const t0 = Date.now() - 3_600_000;
    for (let batch = 0; batch < READINGS / 100; batch++) {
      const body = Array.from({ length: 100 }, (_, i) => {
        const n = batch * 100 + i;
        return { time: new Date(t0 + n * 1000).toISOString(), ship_id: 'ship-1', cargo_id: 'temp', value: n };
      });
      const response = await fetch(`${site.url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
    }
    await waitUntil('the backlog counted', async () => (await upstream(site)).backlog === READINGS, 10_000);
    const before = await upstream(site);
    expect(before.budgetBytesPerS).toBe(4096);
    expect(before.catchUpSeconds).toBeGreaterThan(5);

    await spawn(centralEnv);
    const central = centralEnv.QUESTDB_TABLE;
    const count = async (): Promise<number> => {
      try {
        return Number((await sql(`SELECT count() FROM '${central}'`)).dataset[0]?.[0] ?? 0);
      } catch {
        return 0;
      }
    };
    await waitUntil('the first readings at the centre', async () => (await count()) > 0, 30_000);
    // The centre is current before the backlog is: the newest reading is there among the first.
    const first = await sql<[number, number, number]>(`SELECT count(), min(value), max(value) FROM '${central}'`);
    const [arrived, , newest] = first.dataset[0]!;
    expect(newest).toBe(READINGS - 1);
    expect(arrived).toBeLessThan(READINGS);

    await waitUntil('the site caught up', async () => (await upstream(site)).backlog === 0, 60_000);
    expect(await waitForCount(`SELECT count() FROM '${central}'`, READINGS, 30_000)).toBe(READINGS);
    expect(await storedCounts(central)).toEqual({ rows: READINGS, distinct: READINGS });
    const values = await sql<[number, number, number]>(`SELECT sum(value), min(value), max(value) FROM '${central}'`);
    expect(values.dataset[0]).toEqual([(READINGS * (READINGS - 1)) / 2, 0, READINGS - 1]);
    expect(site.logs.some((l) => l.event === 'current_first' && l.sink === 'upstream')).toBe(true);
  }, 120_000);
});
