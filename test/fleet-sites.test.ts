import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { dashboardQueries, expandSql } from '../scripts/lib/grafana-expand.mjs';
import { FleetRecorder } from '../src/health/fleet-rows.js';
import { hashKey } from '../src/keys/key-hash.js';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { writeKeyFile } from '../src/keys/key-file.js';
import { evaluateRule, loadAlertRules } from './support/grafana-alerting.js';
import { createTopic, readTopic, kafkaForTests } from './support/kafka.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, uniqueTable, waitForCount, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

// Two site gateways and a central gateway, each with its own table in the suite's QuestDB, and a
// real Kafka broker: what the centre makes of the sites' readings and reports, and the Fleet
// dashboard's queries on the reports, run as Grafana sends them.

const DASHBOARD = JSON.parse(
  readFileSync(join(import.meta.dirname, '..', 'grafana', 'provisioning', 'dashboards', 'harbor', 'fleet.json'), 'utf8'),
);
const query = (title: string): string => {
  const found = dashboardQueries(DASHBOARD).find((q) => q.title === title);
  if (found === undefined) throw new Error(`no panel ${title}`);
  return found.rawSql;
};

// Unique per run: the fleet tables are the suite QuestDB's, and the site names tell this run's rows apart.
const run = Date.now().toString(36);
const SITE_A = `Pier Ä ${run}`;
const SITE_B = `pier-b-${run}`;
const CENTRE = `centre-${run}`;
const KEYS = { a: 'site-a-key-0123456789', b: 'site-b-key-0123456789', devices: 'devices-key-0123456789' };

const testKafka = kafkaForTests();
let topic: string;
let central: TestGateway;
let siteA: TestGateway;
let siteB: TestGateway;
let client: pg.Client;

beforeAll(async () => {
  topic = `fleet-${run}`;
  await createTopic(testKafka.broker.bootstrap, topic, 3);
  const keyFile = join(tempDir('fleet-keys'), 'api-keys');
  writeKeyFile(keyFile, [
    { name: 'site-a', hash: hashKey(KEYS.a), site: SITE_A },
    { name: 'site-b', hash: hashKey(KEYS.b), site: SITE_B },
    { name: 'devices', hash: hashKey(KEYS.devices) },
  ]);
  const reporting = { HEALTH_REPORT: 'true', HOUSEKEEPING_CRON: '* * * * * *' };
  central = await startTestGateway({ ...reporting, SITE_ID: CENTRE, API_KEYS_FILE: keyFile });
  const site = (id: string, key: string) =>
    startTestGateway({
      ...reporting,
      SITE_ID: id,
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: key,
      KAFKA_BROKERS: testKafka.broker.bootstrap,
      KAFKA_TOPIC: topic,
    });
  [siteA, siteB] = await Promise.all([site(SITE_A, KEYS.a), site(SITE_B, KEYS.b)]);
  client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
  await client.connect();
}, 240_000);

afterAll(async () => {
  await client?.end();
  await Promise.all([siteA?.stop(), siteB?.stop()]);
  await central?.stop();
}, 60_000);

const post = (url: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers }, body: JSON.stringify(body) });

/** The site and value of each row of `table`'s readings of `ship`. */
const rowsOf = async (table: string, ship: string) =>
  (await sql<[string | null, number]>(`SELECT site, value FROM "${table}" WHERE ship_id = '${ship}' ORDER BY value`)).dataset;

describe('two sites and a central gateway', () => {
  it('stores the same reading of two sites as two rows at the centre, and as two Kafka messages told apart by site', async () => {
    const reading = (value: number) => ({ time: '2026-11-25T12:00:00Z', ship_id: 'pump-1', cargo_id: 'pressure', value });
    expect((await siteA.post('/api/v2/ingest/', reading(111))).status).toBe(200);
    expect((await siteB.post('/api/v2/ingest/', reading(222))).status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${central.table}" WHERE ship_id = 'pump-1'`, 2, 30_000)).toBe(2);
    await waitForWalApplied(central.table);
    expect(await rowsOf(central.table, 'pump-1')).toEqual([
      [SITE_A, 111],
      [SITE_B, 222],
    ]);
    // Each site's own table holds its own reading, under its own site.
    for (const site of [siteA, siteB]) expect(await waitForCount(`SELECT count() FROM "${site.table}"`, 1, 30_000)).toBe(1);
    expect(await rowsOf(siteA.table, 'pump-1')).toEqual([[SITE_A, 111]]);
    expect(await rowsOf(siteB.table, 'pump-1')).toEqual([[SITE_B, 222]]);

    await waitUntil('both readings in Kafka', async () => (await readTopic(testKafka.broker.bootstrap, topic)).length >= 2, 30_000);
    const messages = (await readTopic(testKafka.broker.bootstrap, topic)).map((m) => JSON.parse(m.value));
    // Each site's gateway names its instance too: consumers can tell two gateways of one site id apart.
    const instance = expect.stringMatching(/^[a-z2-7]{16}$/);
    const pumps = messages.filter((m) => m.ship_id === 'pump-1').sort((x, y) => x.value - y.value);
    expect(pumps).toEqual([
      { time: '2026-11-25T12:00:00.000000000Z', ship_id: 'pump-1', cargo_id: 'pressure', value: 111, site: SITE_A, instance },
      { time: '2026-11-25T12:00:00.000000000Z', ship_id: 'pump-1', cargo_id: 'pressure', value: 222, site: SITE_B, instance },
    ]);
    expect(pumps[0].instance).not.toBe(pumps[1].instance);
  });

  it('lets a key bound to a site write as that site only, and gives readings devices send straight to the centre its own site', async () => {
    const ingest = `${central.url}/api/v2/ingest/`;
    const reading = (value: number) => ({ time: '2026-11-25T13:00:00Z', ship_id: 'gate-sensor', cargo_id: 'open', value });
    const asB = await post(ingest, KEYS.a, reading(1), { 'x-harbor-site': encodeURIComponent(SITE_B) });
    expect(asB.status).toBe(403);
    expect(await asB.json()).toMatchObject({ details: [{ loc: ['header', 'x-harbor-site'], type: 'site_not_allowed' }] });
    expect((await post(ingest, KEYS.a, reading(2))).status).toBe(200);
    expect((await post(ingest, KEYS.devices, reading(3))).status).toBe(200);
    expect((await post(ingest, KEYS.devices, reading(4), { 'x-harbor-site': '%FF' })).status).toBe(400);
    expect(await waitForCount(`SELECT count() FROM "${central.table}" WHERE ship_id = 'gate-sensor'`, 2, 30_000)).toBe(2);
    await waitForWalApplied(central.table);
    expect(await rowsOf(central.table, 'gate-sensor')).toEqual([
      [SITE_A, 2],
      [CENTRE, 3],
    ]);
  });

  it("brings every site's health to the centre, and the Fleet dashboard lists each site with its sinks", async () => {
    const range = { from: Date.now() - 3_600_000, to: Date.now() + 60_000 };
    const sites = async () => {
      try {
        return (await client.query(expandSql(query('Sites'), { range }))).rows.filter((r) => r.site === SITE_A || r.site === SITE_B);
      } catch {
        // Until the first report has created the table.
        return [];
      }
    };
    await waitUntil('both sites reported', async () => (await sites()).length === 2, 30_000);
    for (const row of await sites()) {
      expect(row).toMatchObject({ reporting: 'reporting', state: 'delivering', version: expect.any(String), gateway: expect.any(String) });
      expect(Math.abs(row.clock_offset_s)).toBeLessThan(5);
      expect(Number(row.silent_s)).toBeLessThan(60);
    }
    const sinks = (await client.query(expandSql(query('Sinks of each site'), { range }))).rows.filter((r) => r.site === SITE_A);
    expect(sinks.map((r) => r.sink)).toEqual(['kafka', 'questdb', 'upstream']);
    for (const sink of sinks)
      expect(sink).toMatchObject({ backlog_readings: expect.anything(), state: expect.stringMatching(/up to date|behind/) });
    for (const title of ['Sites reporting', 'Sites silent', 'Sites refusing readings', 'Sites with a clock off']) {
      const rows = (await client.query(expandSql(query(title), { range }))).rows;
      expect(rows, title).toHaveLength(1);
    }
    for (const title of ['Queued readings per site', 'Clock offset per site']) {
      const rows = (await client.query(expandSql(query(title), { range }))).rows;
      expect(rows.some((r) => r.site === SITE_A)).toBe(true);
    }
  });
});

describe('the Fleet dashboard and its alerts on seeded reports', () => {
  const siteTable = uniqueTable('fleet_sites');
  const sinkTable = uniqueTable('fleet_sinks');
  const rename = (text: string) => text.replace(/\bfleet_site_health\b/g, siteTable).replace(/\bfleet_sink_health\b/g, sinkTable);

  it('flags a site silent for over 5 minutes as stale, and its alert fires until it reports again', async () => {
    const questdb = new QuestDbHttp({ url: inject('questdbUrl'), timeoutMs: 10_000, username: undefined, password: undefined });
    const recorder = new FleetRecorder(questdb, { site: siteTable, sink: sinkTable });
    const report = (site: string, state: 'delivering' | 'refusing', sentAt: number) => ({
      site,
      gateway: `gw-${site}`,
      version: '0.5.0',
      sentAt: new Date(sentAt).toISOString(),
      uptimeSeconds: 60,
      state,
      stateText: state === 'refusing' ? 'refusing readings — upstream unreachable for 12 min, queue full' : 'delivering',
      ready: state !== 'refusing',
      clockSynchronized: true,
      queue: { readings: 10, bytes: 500, maxBytes: 1 << 30, oldestAgeSeconds: 1 },
      deadLetters: 0,
      acceptedReadings: 100,
      sinks: [
        {
          sink: 'upstream',
          state: 'up to date',
          backlogReadings: 0,
          oldestAgeSeconds: null,
          deliveredReadings: 100,
          failedDeliveries: 0,
          deadLettered: 0,
          droppedReadings: 0,
        },
      ],
    });
    const now = Date.now();
    try {
      expect(await recorder.record(report('quiet', 'delivering', now - 12 * 60_000), now - 12 * 60_000)).toEqual({ ok: true });
      expect(await recorder.record(report('busy', 'refusing', now - 3_000), now - 3_000)).toEqual({ ok: true });
      // A site whose clock is 2 h ahead of the centre's.
      expect(await recorder.record(report('ahead', 'delivering', now + 7_200_000), now)).toEqual({ ok: true });
      await waitForWalApplied(siteTable);
      await waitForWalApplied(sinkTable);

      const range = { from: now - 3_600_000, to: now + 60_000 };
      const sites = (await client.query(expandSql(rename(query('Sites')), { range }))).rows;
      expect(sites.map((r) => [r.site, r.reporting, r.state])).toEqual([
        ['ahead', 'reporting', 'delivering'],
        ['busy', 'reporting', 'refusing'],
        ['quiet', 'stale', 'delivering'],
      ]);
      expect(Math.round(sites[0]!.clock_offset_s)).toBe(7200);
      const count = async (title: string) => Number((await client.query(expandSql(rename(query(title)), { range }))).rows[0]!.sites);
      expect([
        await count('Sites reporting'),
        await count('Sites silent'),
        await count('Sites refusing readings'),
        await count('Sites with a clock off'),
      ]).toEqual([2, 1, 1, 1]);

      const rules = loadAlertRules('fleet-rules.yaml').groups.flatMap((g) => g.rules);
      const firing = async (uid: string) =>
        (await evaluateRule(client, rules.find((r) => r.uid === uid)!, rename)).filter((i) => i.firing).map((i) => i.labels.site);
      expect(await firing('harbor-fleet-site-silent')).toEqual(['quiet']);
      expect(await firing('harbor-fleet-site-refusing')).toEqual(['busy']);
      expect(await firing('harbor-fleet-site-clock')).toEqual(['ahead']);

      // The silent site reports again: its alert resolves.
      expect(await recorder.record(report('quiet', 'delivering', Date.now()), Date.now())).toEqual({ ok: true });
      await waitForWalApplied(siteTable);
      expect(await firing('harbor-fleet-site-silent')).toEqual([]);
    } finally {
      await questdb.close();
    }
  });
});
