import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/lib/ports.mjs';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, killAll, spawnGateway, type GatewayProcess } from './support/process.js';
import { sql, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

// Two real gateway processes, site → centre, the site thinning by its catalogue: the centre gets the
// deadband's and the summaries' subset, exactly, while the site's own table keeps every reading. The
// site is killed (-9) between two posts: what it decides after the restart follows from the state
// it kept with its mark (a reading within the deadband of one sent before the kill stays back; an
// interval opened before the kill is summed across it).

const CATALOGUE = `thinning:
  - match: temp*
    deadband: 0.5
    max_interval_minutes: 1
  - match: rpm
    summary_seconds: 10
`;

const processes: GatewayProcess[] = [];
afterAll(async () => {
  await killAll(processes);
});

async function spawn(env: Record<string, string>): Promise<GatewayProcess> {
  const p = await spawnGateway({ DURABILITY: 'process-crash', FLUSH_INTERVAL_MS: '100', FLUSH_BACKOFF_MAX_MS: '500', ...env });
  processes.push(p);
  return p;
}

interface SinkStatus {
  name: string;
  backlog: number;
  delivered: number;
  thinned: number;
}

async function upstream(site: GatewayProcess): Promise<SinkStatus> {
  const status = (await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { sinks: SinkStatus[] };
  return status.sinks.find((s) => s.name === 'upstream')!;
}

async function post(site: GatewayProcess, readings: [number, string, number][]): Promise<void> {
  const body = readings.map(([ms, cargo, value]) => ({ time: new Date(ms).toISOString(), ship_id: 'ship-1', cargo_id: cargo, value }));
  const response = await fetch(`${site.url}/api/v2/ingest/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
}

const caughtUp = (site: GatewayProcess) =>
  waitUntil('the site forwarded its backlog', async () => (await upstream(site)).backlog === 0, 30_000);

describe('thinning for the centre', () => {
  it('sends the centre exactly the deadband and summary subset, the same across a kill -9 of the site, and keeps every reading locally', async () => {
    const centralEnv = gatewayEnv('thin-central', { PORT: String(await freePort()) });
    await spawn(centralEnv);
    const centralUrl = `http://127.0.0.1:${centralEnv.PORT}`;
    const dir = tempDir('thin-site');
    const catalogue = join(dir, 'catalogue.yaml');
    writeFileSync(catalogue, CATALOGUE);
    const siteEnv = gatewayEnv('thin-site', {
      PORT: String(await freePort()),
      SITE_ID: 'thin-site',
      CATALOGUE_FILE: catalogue,
      UPSTREAM_URL: `${centralUrl}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
    });
    let site = await spawn(siteEnv);

    // On a 10 s boundary, ten minutes ago: the summaries' intervals are known.
    const t0 = Math.floor((Date.now() - 600_000) / 10_000) * 10_000;
    await post(site, [
      [t0, 'temp', 20],
      [t0 + 1000, 'temp', 20.2],
      [t0, 'rpm', 1],
      [t0 + 4000, 'rpm', 3],
      [t0 + 8000, 'rpm', 5],
      [t0, 'level', 1],
    ]);
    await caughtUp(site);

    site.child.kill('SIGKILL');
    await site.exited;
    site = await spawn(siteEnv);
    await post(site, [
      [t0 + 2000, 'temp', 20.4],
      [t0 + 3000, 'temp', 20.7],
      [t0 + 4000, 'temp', 21],
      [t0 + 5000, 'temp', 25],
      [t0 + 65_000, 'temp', 25.1],
      [t0 + 12_000, 'rpm', 10],
      [t0 + 16_000, 'rpm', 20],
      [t0 + 25_000, 'rpm', 7],
      [t0 + 1000, 'level', 2],
    ]);
    await caughtUp(site);

    const expected = [
      [t0, 'level', 1],
      [t0 + 1000, 'level', 2],
      [t0, 'rpm:count', 3],
      [t0, 'rpm:last', 5],
      [t0, 'rpm:max', 5],
      [t0, 'rpm:mean', 3],
      [t0, 'rpm:min', 1],
      [t0 + 10_000, 'rpm:count', 2],
      [t0 + 10_000, 'rpm:last', 20],
      [t0 + 10_000, 'rpm:max', 20],
      [t0 + 10_000, 'rpm:mean', 15],
      [t0 + 10_000, 'rpm:min', 10],
      [t0, 'temp', 20],
      [t0 + 3000, 'temp', 20.7],
      [t0 + 5000, 'temp', 25],
      [t0 + 65_000, 'temp', 25.1],
    ]
      .sort(([msA, a], [msB, b]) => (a === b ? (msA as number) - (msB as number) : a! < b! ? -1 : 1))
      .map(([ms, cargo, value]) => [new Date(ms as number).toISOString().replace('Z', '000000Z'), cargo, value]);
    const central = centralEnv.QUESTDB_TABLE;
    expect(await waitForCount(`SELECT count() FROM '${central}'`, expected.length)).toBe(expected.length);
    const rows = await sql(`SELECT time, cargo_id, value FROM '${central}' ORDER BY cargo_id, time`);
    // Each reading of the subset once, and nothing else.
    expect(rows.dataset).toEqual(expected);

    // The site's own table has all 15 readings; /status counts the 9 not sent as themselves (after the restart: 5).
    expect(await waitForCount(`SELECT count() FROM '${siteEnv.QUESTDB_TABLE}'`, 15)).toBe(15);
    expect((await upstream(site)).thinned).toBe(5);
  }, 120_000);

  it('says at its start that MAX_ID_LENGTH leaves a summary no room for its ids', async () => {
    const dir = tempDir('thin-short-ids');
    const catalogue = join(dir, 'catalogue.yaml');
    writeFileSync(catalogue, CATALOGUE);
    const site = await spawn(
      gatewayEnv('thin-short-ids', { PORT: String(await freePort()), CATALOGUE_FILE: catalogue, MAX_ID_LENGTH: '6' }),
    );
    await waitUntil(
      'the warning',
      async () => site.logs.some((l) => l['event'] === 'summary_rules_unused' && l['maxIdLength'] === 6),
      10_000,
    );
  });
});
