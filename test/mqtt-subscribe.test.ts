import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MOSQUITTO_PUB, startMosquitto, type MosquittoBroker } from '../scripts/lib/mosquitto.mjs';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const run = promisify(execFile);

interface Status {
  mqtt: { subscription: { connected: boolean; messages: number; readings: number; withoutReadings: number; deadLettered: number } };
}
const status = async (gw: TestGateway): Promise<Status> =>
  (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as Status;

/** Publishes one message a line with mosquitto_pub (QoS 1, each line a message), as site devices publish to their broker. */
async function publishLines(broker: MosquittoBroker, topic: string, lines: string[]): Promise<void> {
  const child = execFile(MOSQUITTO_PUB, ['-h', '127.0.0.1', '-p', String(broker.port), '-q', '1', '-t', topic, '-l']);
  child.stdin?.end(`${lines.join('\n')}\n`);
  const code = await new Promise((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`mosquitto_pub exited ${code}`);
}

describe('the gateway subscribed to a site broker', () => {
  let broker: MosquittoBroker;
  let gw: TestGateway | undefined;
  const dataDir = tempDir('mqtt-sub');
  const env = () => ({
    MQTT_SUBSCRIBE_URL: broker.url,
    MQTT_SUBSCRIBE_PRESET: 'tasmota',
    MQTT_SUBSCRIBE_CLIENT_ID: 'harbor-test-subscriber',
    DATA_DIR: dataDir,
    DURABILITY: 'power-loss',
    ...(gw === undefined ? {} : { QUESTDB_TABLE: gw.table }),
  });

  beforeAll(async () => {
    broker = await startMosquitto();
  });
  afterAll(async () => {
    await gw?.stop();
    await broker?.stop();
  });

  it('stores what Tasmota devices publish, acknowledging each message after its commit', async () => {
    gw = await startTestGateway(env());
    await waitUntil('the subscription to connect', async () => (await status(gw!)).mqtt.subscription.connected);
    const sensor = (i: number) =>
      JSON.stringify({ Time: '2026-02-04T11:00:00', AM2301: { Temperature: 20 + i / 10, Humidity: 40 }, TempUnit: 'C' });
    await publishLines(
      broker,
      'tele/plug-1/SENSOR',
      Array.from({ length: 50 }, (_, i) => sensor(i)),
    );
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'plug-1'`, 100)).toBe(100);
    const temperatures = await sql<[number]>(`SELECT value FROM "${gw.table}" WHERE cargo_id = 'AM2301.Temperature' ORDER BY time`);
    expect(temperatures.dataset.map(([v]) => v)).toEqual(Array.from({ length: 50 }, (_, i) => 20 + i / 10));
    // A STATE message is not subscribed to; a SENSOR message without numbers is acknowledged and counted.
    await run(MOSQUITTO_PUB, [
      '-h',
      '127.0.0.1',
      '-p',
      String(broker.port),
      '-q',
      '1',
      '-t',
      'tele/plug-1/SENSOR',
      '-m',
      '{"Switch1":"ON"}',
    ]);
    await waitUntil('the message without numbers to be counted', async () => (await status(gw!)).mqtt.subscription.withoutReadings === 1);
  });

  it('keeps nothing back: what was published while the gateway was stopped arrives after its start', async () => {
    const table = gw!.table;
    await gw!.stop();
    await publishLines(
      broker,
      'tele/plug-2/SENSOR',
      Array.from({ length: 300 }, (_, i) => JSON.stringify({ ENERGY: { Power: i } })),
    );
    // The broker restarts too: the session and its queued messages are on its disk.
    await broker.restart();
    gw = await startTestGateway({ ...env(), QUESTDB_TABLE: table });
    expect(await waitForCount(`SELECT count() FROM "${table}" WHERE ship_id = 'plug-2'`, 300, 60_000)).toBe(300);
    const powers = await sql<[number]>(`SELECT value FROM "${table}" WHERE ship_id = 'plug-2' ORDER BY value`);
    expect(powers.dataset.map(([v]) => v)).toEqual(Array.from({ length: 300 }, (_, i) => i));
  }, 120_000);

  it('keeps a message whose readings the schema refuses as a dead letter, and goes on', async () => {
    const long = 'x'.repeat(150);
    await run(MOSQUITTO_PUB, ['-h', '127.0.0.1', '-p', String(broker.port), '-q', '1', '-t', `tele/${long}/SENSOR`, '-m', '{"Power":1}']);
    await run(MOSQUITTO_PUB, ['-h', '127.0.0.1', '-p', String(broker.port), '-q', '1', '-t', 'tele/plug-3/SENSOR', '-m', '{"Power":2}']);
    expect(await waitForCount(`SELECT count() FROM "${gw!.table}" WHERE ship_id = 'plug-3'`, 1)).toBe(1);
    const db = new Database(join(dataDir, 'queue.db'), { readonly: true });
    const letters = db.prepare("SELECT reason, line FROM dead_letters WHERE sink = 'mqtt-subscribe'").all() as {
      reason: string;
      line: string;
    }[];
    db.close();
    expect(letters).toHaveLength(1);
    expect(letters[0]!.reason).toMatch(/string_too_long|at most 100 characters/);
    expect(letters[0]!.line).toBe('{"Power":1}');
    expect((await status(gw!)).mqtt.subscription.deadLettered).toBe(1);
  });
});
