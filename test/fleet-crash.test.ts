import { afterAll, describe, expect, it } from 'vitest';
import { crashRounds } from './support/crash-rounds.js';
import { createTopic, kafkaForTests } from './support/kafka.js';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { sql, storedCounts, uniqueTable, waitForDrained } from './support/questdb-sql.js';

// kill -9 rounds of a site gateway with three sinks: its local QuestDB table, the upstream sink to
// a central gateway and a Kafka broker, which is killed -9 in every round too. The rounds check the
// local table against every answer; the central table must then hold exactly the same readings (a
// replay after a kill lands on the same keys), and Kafka every answered reading at least once.

const centrals: TestGateway[] = [];
const testKafka = kafkaForTests();
afterAll(async () => {
  for (const central of centrals) await central.stop();
}, 60_000);

const count = async (query: string): Promise<number> => Number((await sql(query)).dataset[0]?.[0]);

describe.each(['process-crash', 'power-loss'] as const)('kill -9 of a site with an upstream and a Kafka sink (%s)', (durability) => {
  it('keeps every answered reading exactly once locally and centrally, and at least once in Kafka, the broker killed -9 too', async () => {
    const topic = `crash-${durability}-${Date.now().toString(36)}`;
    await createTopic(testKafka.broker.bootstrap, topic, 3);
    const central = await startTestGateway();
    centrals.push(central);
    const siteTable = uniqueTable('crash_site');
    const report = await crashRounds(durability, {
      table: siteTable,
      // A site id of its own: under the central gateway's (both the host name) it would be refused as a second gateway.
      sinkEnv: {
        SITE_ID: 'crash-site',
        UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
        UPSTREAM_API_KEY: TEST_KEY,
        FLUSH_BACKOFF_MAX_MS: '500',
      },
      kafka: { broker: testKafka.broker, topic, killBroker: 1 },
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
    // Every answered reading at least once in Kafka; a kill mid-request may send one again (counted).
    expect(report.kafka).toMatchObject({ missing: 0, strangers: 0, brokerKills: 3 });
    console.info(
      `Kafka (${durability}): ${report.kafka?.messages} messages for ${report.ok} answered readings, ${report.kafka?.duplicates} duplicates`,
    );
  }, 240_000);
});
