import { afterAll, describe, expect, inject, it } from 'vitest';
import { startDevices } from '../scripts/lib/device-load.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { killAll, spawnGateway, type GatewayProcess } from './support/process.js';
import { sql, storedCounts, uniqueTable, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

// A chain of two real gateway processes: site → central → QuestDB, the site also delivering to its
// own table. The central one is killed (-9) under load and started again; the site keeps answering
// and its local sink keeps flowing; afterwards every reading the site answered is in the central
// table exactly once.

const SITE_KEY = 'site-key-0123456789';
const CENTRAL_KEY = 'central-key-0123456789';

const processes: GatewayProcess[] = [];
afterAll(async () => {
  await killAll(processes);
});

async function spawn(env: Record<string, string>): Promise<GatewayProcess> {
  const p = await spawnGateway({
    QUESTDB_URL: inject('questdbUrl'),
    DURABILITY: 'process-crash',
    HEALTH_REPORT: 'false',
    FLUSH_BACKOFF_MAX_MS: '1000',
    ...env,
  });
  processes.push(p);
  return p;
}

interface SinkStatus {
  name: string;
  backlog: number;
  delivered: number;
  consecutiveFailures: number;
}

async function sinks(site: GatewayProcess): Promise<Record<string, SinkStatus>> {
  const status = (await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': SITE_KEY } })).json()) as { sinks: SinkStatus[] };
  return Object.fromEntries(status.sinks.map((s) => [s.name, s]));
}

/** Rows of `table`, 0 while its first rows have not created it. */
const count = async (table: string): Promise<number> => {
  try {
    return Number((await sql(`SELECT count() FROM '${table}'`)).dataset[0]?.[0] ?? 0);
  } catch {
    return 0;
  }
};

describe('site → central → QuestDB', () => {
  it('survives a kill -9 of the central gateway under load: every answered reading arrives centrally exactly once', async () => {
    const centralTable = uniqueTable('central');
    const siteTable = uniqueTable('site');
    const centralPort = String(await freePort());
    const centralEnv = {
      PORT: centralPort,
      API_KEY: CENTRAL_KEY,
      DATA_DIR: tempDir('central'),
      QUESTDB_TABLE: centralTable,
      FLUSH_INTERVAL_MS: '200',
    };
    let central = await spawn(centralEnv);
    const site = await spawn({
      // A site id of its own: under the central gateway's (both the host name) it would be refused as a second gateway.
      SITE_ID: 'chain-site',
      API_KEY: SITE_KEY,
      DATA_DIR: tempDir('site'),
      QUESTDB_TABLE: siteTable,
      FLUSH_INTERVAL_MS: '100',
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: CENTRAL_KEY,
      UPSTREAM_BATCH_READINGS: '500',
    });
    const load = startDevices({ url: site.url, apiKey: SITE_KEY, date: '2026-06-01', batchSize: 25, devices: 2, pauseMs: 10 });
    try {
      await waitUntil('readings forwarded to the central gateway', async () => (await count(centralTable)) > 500, 30_000);

      central.child.kill('SIGKILL');
      await central.exited;
      const acceptedAtCut = load.accepted;
      const localAtCut = (await sinks(site))['questdb']!.delivered;
      await waitUntil(
        'the site answering and its local sink delivering while the central gateway is down',
        async () => {
          const s = await sinks(site);
          return (
            load.accepted > acceptedAtCut + 10_000 &&
            s['questdb']!.delivered > localAtCut + 1500 &&
            s['upstream']!.consecutiveFailures > 1 &&
            s['upstream']!.backlog > 5000
          );
        },
        30_000,
      );

      central = await spawn(centralEnv);
      const forwardedAtRestart = (await sinks(site))['upstream']!.delivered;
      await waitUntil('forwarding again under load', async () => (await sinks(site))['upstream']!.delivered > forwardedAtRestart, 30_000);
    } finally {
      await load.stop();
    }
    expect(load.refused).toBe(0);

    await waitUntil('the site caught up', async () => (await sinks(site))['upstream']!.backlog === 0, 30_000);
    expect(await waitForCount(`SELECT count() FROM '${centralTable}'`, load.accepted, 30_000)).toBe(load.accepted);
    expect(await storedCounts(centralTable)).toEqual({ rows: load.accepted, distinct: load.accepted });
    expect(await waitForCount(`SELECT count() FROM '${siteTable}'`, load.accepted, 30_000)).toBe(load.accepted);
    expect(await storedCounts(siteTable)).toEqual({ rows: load.accepted, distinct: load.accepted });
    // The central copy is the site's: same times, ships and values.
    const differing = await sql(
      `SELECT count() FROM '${centralTable}' c LEFT JOIN '${siteTable}' s ON (time, ship_id, cargo_id) WHERE s.value != c.value OR s.value = NULL`,
    );
    expect(Number(differing.dataset[0]?.[0])).toBe(0);
    // The upstream key never reaches the site's logs, failures included.
    expect(site.logs.some((l) => l.event === 'delivery_failed' && l.sink === 'upstream')).toBe(true);
    expect(JSON.stringify(site.logs)).not.toContain(CENTRAL_KEY);
  }, 120_000);
});
