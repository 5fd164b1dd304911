import { afterAll, describe, expect, it } from 'vitest';
import { startDevices } from '../scripts/lib/device-load.mjs';
import { startKafka, type KafkaBroker } from '../scripts/lib/kafka.mjs';
import { TEST_KEY } from './support/gateway.js';
import { createTopic, readTopic } from './support/kafka.js';
import { gatewayEnv, spawnGateway, type GatewayProcess } from './support/process.js';
import { storedCounts } from './support/questdb-sql.js';
import { waitUntil } from './support/wait.js';

interface SinkStatus {
  name: string;
  backlog: number;
  delivered: number;
  failures: number;
  consecutiveFailures: number;
  deadLettered: number;
  dropped: number;
}

// On a cold cache Maven first fetches the broker (up to 90 s measured while another test fetched
// it too on a busy machine), then the broker starts and the run itself takes about 30 s.
const FETCH_START_AND_RUN_MS = 300_000;

let broker: KafkaBroker | undefined;
let gateway: GatewayProcess | undefined;
afterAll(async () => {
  gateway?.child.kill('SIGKILL');
  await gateway?.exited;
  await broker?.close();
}, 60_000);

describe('Kafka outage under load, beside the local QuestDB', () => {
  it(
    'keeps QuestDB flowing while Kafka is down, then Kafka catches up with every answered reading',
    async () => {
      broker = await startKafka();
      const topic = 'fleet-readings';
      await createTopic(broker.bootstrap, topic, 3);
      const env = gatewayEnv('kafka-outage', {
        FLUSH_INTERVAL_MS: '50',
        FLUSH_BACKOFF_MAX_MS: '500',
        DURABILITY: 'process-crash',
        KAFKA_BROKERS: broker.bootstrap,
        KAFKA_TOPIC: topic,
        KAFKA_TIMEOUT_MS: '2000',
      });
      const table = env.QUESTDB_TABLE;
      const gw = await spawnGateway(env);
      gateway = gw;
      const sinks = async (): Promise<Record<string, SinkStatus>> => {
        const status = (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { sinks: SinkStatus[] };
        return Object.fromEntries(status.sinks.map((s) => [s.name, s]));
      };
      const load = startDevices({ url: gw.url, apiKey: TEST_KEY, date: '2026-05-01', batchSize: 20, pauseMs: 5 });
      try {
        await waitUntil('both sinks delivering under load', async () => {
          const s = await sinks();
          return s['questdb']!.delivered > 0 && s['kafka']!.delivered > 0;
        });

        await broker.stop();
        const down = await sinks();
        await waitUntil(
          'Kafka deliveries failing while QuestDB keeps delivering and devices are answered',
          async () => {
            const s = await sinks();
            return s['kafka']!.consecutiveFailures >= 2 && s['questdb']!.delivered > down['questdb']!.delivered + 500;
          },
          60_000,
        );
        const during = await sinks();
        expect(during['kafka']!.backlog).toBeGreaterThan(0);

        await broker.start();
        const back = during['kafka']!.delivered;
        await waitUntil('Kafka delivering again', async () => (await sinks())['kafka']!.delivered > back, 60_000);
      } finally {
        await load.stop();
      }
      expect(load.refused).toBe(0);
      await waitUntil(
        'both sinks caught up',
        async () => {
          const s = await sinks();
          return s['questdb']!.backlog === 0 && s['kafka']!.backlog === 0;
        },
        60_000,
      );
      const final = await sinks();
      expect(final['kafka']).toMatchObject({ deadLettered: 0, dropped: 0 });
      gw.child.kill('SIGTERM');
      expect((await gw.exited).code).toBe(0);

      expect(await storedCounts(table)).toEqual({ rows: load.accepted, distinct: load.accepted });
      const messages = await readTopic(broker.bootstrap, topic);
      const values = messages.map((m) => JSON.parse(m.value).value as number);
      const distinct = new Set(values);
      // None lost: every answered reading is in Kafka. A request the broker wrote but did not
      // acknowledge before it went away is sent again: its readings are the duplicates.
      expect(distinct.size).toBe(load.accepted);
      const duplicates = messages.length - distinct.size;
      const failures = new Map<string, number>();
      for (const line of gw.logs.filter((l) => l.event === 'delivery_failed' && l.sink === 'kafka')) {
        // The same cause reads alike whatever the ports and milliseconds: count causes.
        const cause = String(line.error).replace(/\d+/g, 'N');
        failures.set(cause, (failures.get(cause) ?? 0) + 1);
      }
      console.info(
        `Kafka outage: ${load.accepted} readings answered, ${messages.length} messages, ${duplicates} duplicates; failed deliveries: ${JSON.stringify(Object.fromEntries(failures))}`,
      );
      // Only the request that failed is sent again (those acknowledged before it in its batch are
      // skipped), and a request holds at most 64 KiB of keys and values.
      const smallest = Math.min(...messages.map((m) => Buffer.byteLength(m.key) + Buffer.byteLength(m.value)));
      expect(duplicates).toBeLessThanOrEqual(final['kafka']!.failures * Math.floor((64 * 1024) / smallest));
      for (const device of new Set(messages.map((m) => m.key))) {
        const firsts: number[] = [];
        const seen = new Set<number>();
        for (const m of messages.filter((x) => x.key === device)) {
          const value = JSON.parse(m.value).value as number;
          if (!seen.has(value)) firsts.push(value);
          seen.add(value);
        }
        // Each device's readings in its partition in the order it sent them.
        expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
      }
    },
    FETCH_START_AND_RUN_MS,
  );
});
