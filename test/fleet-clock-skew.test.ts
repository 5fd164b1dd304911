import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTopic, readTopic, kafkaForTests } from './support/kafka.js';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { killAll, spawnGateway, type GatewayProcess } from './support/process.js';
import { sql, uniqueTable, waitForCount } from './support/questdb-sql.js';
import { skewedClockEnv } from './support/skewed-clock.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

// Site gateways whose clocks are 2 h ahead and 2 h behind (libfaketime, as boards without a
// real-time clock boot), each forwarding to a central gateway and to a real Kafka broker, which
// refuses message times more than an hour ahead of its own clock. Every reading arrives, none is a
// dead letter, and the site and the centre say how far the clock is off.

const run = Date.now().toString(36);
const testKafka = kafkaForTests();
let topic: string;
let central: TestGateway;
const sites: GatewayProcess[] = [];

beforeAll(async () => {
  topic = `skew-${run}`;
  await createTopic(testKafka.broker.bootstrap, topic, 3);
  central = await startTestGateway({ SITE_ID: `centre-${run}` });
}, 240_000);

afterAll(async () => {
  await killAll(sites);
  await central?.stop();
}, 60_000);

interface Status {
  deadLetters: number;
  sinks: { name: string; backlog: number; clockAheadSeconds: number | null; deadLettered: number }[];
}

const status = async (site: GatewayProcess): Promise<Status> =>
  (await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as Status;

describe.each([
  ['+2h', 7200],
  ['-2h', -7200],
])('a site whose clock is %s off', (offset, seconds) => {
  it('delivers every reading to the centre and to Kafka, dead-letters none, and says how far its clock is off', async () => {
    const id = `skew${seconds > 0 ? 'ahead' : 'behind'}-${run}`;
    const table = uniqueTable('skew');
    const site = await spawnGateway({
      ...skewedClockEnv(offset),
      API_KEY: TEST_KEY,
      SITE_ID: id,
      DATA_DIR: tempDir('skew'),
      QUESTDB_URL: inject('questdbUrl'),
      QUESTDB_TABLE: table,
      DURABILITY: 'process-crash',
      FLUSH_INTERVAL_MS: '100',
      FLUSH_BACKOFF_MAX_MS: '1000',
      HEALTH_REPORT: 'true',
      HOUSEKEEPING_CRON: '* * * * * *',
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
      KAFKA_BROKERS: testKafka.broker.bootstrap,
      KAFKA_TOPIC: topic,
    });
    sites.push(site);
    const post = (path: string, body: unknown) =>
      fetch(`${site.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY },
        body: JSON.stringify(body),
      });
    for (let b = 0; b < 3; b++) {
      const batch = Array.from({ length: 10 }, (_, i) => ({
        time: `2026-11-25T15:0${b}:0${i}Z`,
        ship_id: `ship-${i % 3}`,
        cargo_id: 'temp',
        value: b * 10 + i,
      }));
      expect((await post('/api/v2/ingest/batch', batch)).status).toBe(200);
    }
    // Without a time: the site's clock stamps it.
    expect((await post('/api/v2/ingest/', { ship_id: 'clockless', cargo_id: 'temp', value: 99 })).status).toBe(200);

    await waitUntil('every sink delivered', async () => (await status(site)).sinks.every((s) => s.backlog === 0), 60_000);
    const final = await status(site);
    expect(final.deadLetters).toBe(0);
    expect(await waitForCount(`SELECT count() FROM "${central.table}" WHERE site = '${id}'`, 31, 30_000)).toBe(31);
    const messages = (await readTopic(testKafka.broker.bootstrap, topic)).filter((m) => JSON.parse(m.value).site === id);
    expect(messages).toHaveLength(31);

    const kafka = final.sinks.find((s) => s.name === 'kafka')!;
    if (seconds > 0) {
      // The broker refused the site's times and told its own: messages go stamped on it.
      expect(Math.abs(kafka.clockAheadSeconds! - seconds)).toBeLessThan(60);
      for (const m of messages) expect(Math.abs(Number(m.timestamp) - Date.now())).toBeLessThan(5 * 60_000);
    } else {
      // Kafka takes times in the past as they are: nothing refused, nothing to tell.
      expect(kafka.clockAheadSeconds).toBeNull();
    }

    // The centre knows the offset from the site's reports, and its state in words.
    await waitUntil(
      'a report of the site at the centre',
      async () => {
        try {
          return (await sql(`SELECT count() FROM fleet_site_health WHERE site = '${id}'`)).dataset[0]?.[0] !== 0;
        } catch {
          return false;
        }
      },
      30_000,
    );
    await waitUntil(
      'a report after the deliveries',
      async () =>
        (await sql<[string]>(`SELECT state_text FROM fleet_site_health WHERE site = '${id}' LATEST ON time PARTITION BY site`))
          .dataset[0]?.[0] === (seconds > 0 ? `delivering, clock 2 h ahead of Kafka ${testKafka.broker.bootstrap}` : 'delivering'),
      30_000,
    );
    const [offsetSeconds] = (
      await sql<[number]>(
        `SELECT (cast(site_time AS LONG) - cast(time AS LONG)) / 1000000.0 FROM fleet_site_health WHERE site = '${id}' LATEST ON time PARTITION BY site`,
      )
    ).dataset[0]!;
    expect(Math.abs(offsetSeconds - seconds)).toBeLessThan(60);
  }, 120_000);
});
