// Two gateways forwarding under one site id to a central gateway (a cloned card, two sites given
// one name): the first to forward owns the site at the centre, the other's readings are refused
// and held at its site, nothing is overwritten, and the centre says so in /status, its state
// words, a fleet_site_conflicts row and its site reports' table. Renamed, the second gateway's new
// readings arrive under the new name and those it answered under the old one are set aside; a
// release at the centre's command line gives the site to the next gateway that forwards under it.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { GatewaySnapshot, SinkSnapshot } from '../src/health/snapshot.js';
import { DeadLetterStore } from '../src/queue/dead-letters.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const run = promisify(execFile);
const AT = '2026-11-20T08:00:00Z';

const status = async (gw: TestGateway): Promise<GatewaySnapshot> =>
  (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json() as Promise<GatewaySnapshot>;
const upstream = async (gw: TestGateway): Promise<SinkSnapshot> => (await status(gw)).sinks.find((s) => s.name === 'upstream')!;
const reading = (time: string, value: number) => ({ time, ship_id: 'pump-1', cargo_id: 'pressure', value });

describe('two gateways forwarding under one site id', () => {
  let central: TestGateway;
  const running: TestGateway[] = [];
  const start = async (env: Record<string, string>): Promise<TestGateway> => {
    const gw = await startTestGateway({
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
      HEALTH_REPORT: 'true',
      HOUSEKEEPING_CRON: '* * * * * *',
      ...env,
    });
    running.push(gw);
    return gw;
  };
  const stop = async (gw: TestGateway): Promise<void> => {
    running.splice(running.indexOf(gw), 1);
    await gw.stop();
  };

  beforeAll(async () => {
    central = await startTestGateway({ SITE_ID: 'centre', HOUSEKEEPING_CRON: '* * * * * *' });
  });

  afterAll(async () => {
    for (const gw of running) await gw.stop();
    await central?.stop();
  });

  it('keeps the first owner, refuses and holds the second, overwrites nothing, and says so at the centre', async () => {
    const first = await start({ SITE_ID: 'pier-7' });
    expect((await first.post('/api/v2/ingest/batch', [reading(AT, 111)])).status).toBe(200);
    await waitForCount(`SELECT count() FROM "${central.table}"`, 1);

    const cloneDir = tempDir('clone');
    const clone = await start({ SITE_ID: 'pier-7', DATA_DIR: cloneDir });
    expect((await clone.post('/api/v2/ingest/batch', [reading(AT, 333), reading('2026-11-20T08:00:01Z', 334)])).status).toBe(200);
    await waitUntil('the clone holds its readings', async () =>
      /gives site "pier-7" to another gateway/.test((await upstream(clone)).lastError?.message ?? ''),
    );
    const held = await upstream(clone);
    expect(held).toMatchObject({ backlog: 2, deadLettered: 0 });
    expect(held.lastError?.message).toMatch(
      /readings of this site stay queued until this gateway is renamed \(SITE_ID\) or the claim is released/,
    );

    // The centre: the owner's reading stays, the conflict is in /status, the state words and a row.
    const centre = await status(central);
    const instances = { first: (await status(first)).identity!.instance, clone: (await status(clone)).identity!.instance };
    expect(instances.first).not.toBe(instances.clone);
    expect(centre.siteClaims?.conflicts).toEqual([
      expect.objectContaining({
        site: 'pier-7',
        owner: expect.objectContaining({ instance: instances.first }),
        claimant: expect.objectContaining({ instance: instances.clone }),
      }),
    ]);
    await waitUntil('the conflict row', async () => {
      try {
        return (await sql(`SELECT count() FROM fleet_site_conflicts WHERE claimant_instance = '${instances.clone}'`)).dataset[0]?.[0] !== 0;
      } catch {
        return false;
      }
    });
    const row = await sql<[string, string, number]>(
      `SELECT site, owner_instance, refused_requests FROM fleet_site_conflicts WHERE claimant_instance = '${instances.clone}' LATEST ON time PARTITION BY site`,
    );
    expect(row.dataset[0]?.slice(0, 2)).toEqual(['pier-7', instances.first]);
    await waitUntil('both report', async () => {
      await waitForWalApplied('fleet_site_health');
      const reporters = await sql<[string]>(`SELECT DISTINCT instance FROM fleet_site_health WHERE site = 'pier-7'`);
      return reporters.dataset.length > 0;
    });
    // The clone's reports are refused as its readings are: the fleet view shows the owner's only.
    expect((await sql<[string]>(`SELECT DISTINCT instance FROM fleet_site_health WHERE site = 'pier-7'`)).dataset).toEqual([
      [instances.first],
    ]);
    await waitForDrained(central);
    await waitForWalApplied(central.table);
    expect((await sql(`SELECT site, value FROM "${central.table}"`)).dataset).toEqual([['pier-7', 111]]);

    // Renamed: what it answers now goes under the new name; what it answered as pier-7 is set aside.
    await stop(clone);
    const renamed = await start({ SITE_ID: 'pier-8', DATA_DIR: cloneDir });
    expect((await renamed.post('/api/v2/ingest/batch', [reading('2026-11-20T08:00:02Z', 444)])).status).toBe(200);
    await waitUntil('the renamed gateway delivered', async () => (await upstream(renamed)).backlog === 0);
    expect(await upstream(renamed)).toMatchObject({ deadLettered: 2 });
    await waitForDrained(central);
    await waitForCount(`SELECT count() FROM "${central.table}"`, 2);
    await waitForWalApplied(central.table);
    expect((await sql(`SELECT site, value FROM "${central.table}" ORDER BY time`)).dataset).toEqual([
      ['pier-7', 111],
      ['pier-8', 444],
    ]);
    await stop(renamed);
    const store = new DeadLetterStore(cloneDir);
    expect(store.list(10).map((l) => [l.sink, l.site])).toEqual([
      ['upstream', 'pier-7'],
      ['upstream', 'pier-7'],
    ]);
    store.close();

    // Released at the centre's command line: the next gateway that forwards under pier-7 owns it.
    await stop(first);
    const released = await run(process.execPath, [inject('bundlePath'), 'site-claims', 'release', 'pier-7', '--data-dir', central.dataDir]);
    expect(released.stdout).toMatch(new RegExp(`released site "pier-7" from instance ${instances.first}`));
    const replacement = await start({ SITE_ID: 'pier-7' });
    expect((await replacement.post('/api/v2/ingest/batch', [reading('2026-11-20T08:00:03Z', 555)])).status).toBe(200);
    await waitUntil('the replacement delivered', async () => (await upstream(replacement)).backlog === 0, 30_000);
    await waitForDrained(central);
    await waitForCount(`SELECT count() FROM "${central.table}"`, 3);
    const listed = await run(process.execPath, [inject('bundlePath'), 'site-claims', 'list', '--json', '--data-dir', central.dataDir]);
    const claims = JSON.parse(listed.stdout) as { claims: { site: string; instance: string }[] };
    expect(claims.claims.find((c) => c.site === 'pier-7')?.instance).toBe((await status(replacement)).identity!.instance);
  });
});
