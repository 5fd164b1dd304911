import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeKeyFile } from '../src/keys/key-file.js';
import { hashKey } from '../src/keys/key-hash.js';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { endClient, mqttClient, publish } from './support/mqtt.js';
import { sql, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

const CRANE_KEY = 'crane-key-0123456789abcdef';
const TIME = '2026-02-04T10:00:00.000Z';

/** Readings committed to the queue file, read on a connection of the test's own. */
function committedReadings(dataDir: string): number {
  const db = new Database(join(dataDir, 'queue.db'), { readonly: true, fileMustExist: true });
  try {
    const segments = db.prepare<[], string>("SELECT name FROM sqlite_schema WHERE name GLOB 'segment_[0-9]*'").pluck().all();
    let total = 0;
    for (const name of segments) total += (db.prepare(`SELECT COALESCE(SUM(readings), 0) AS n FROM ${name}`).get() as { n: number }).n;
    return total;
  } finally {
    db.close();
  }
}

function ingestDeadLetters(dataDir: string): { reason: string; line: string; sink: string }[] {
  const db = new Database(join(dataDir, 'queue.db'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare("SELECT reason, line, sink FROM dead_letters WHERE sink LIKE 'mqtt%' ORDER BY id").all() as never;
  } finally {
    db.close();
  }
}

describe('MQTT endpoint for devices', () => {
  let gw: TestGateway;
  let url: string;
  let tlsUrl: string;
  const keysFile = join(tempDir('mqtt-keys'), 'api-keys');

  beforeAll(async () => {
    writeKeyFile(keysFile, [{ name: 'crane', hash: hashKey(CRANE_KEY), shipPrefix: 'crane-' }]);
    gw = await startTestGateway({
      MQTT: 'on',
      MQTT_PORT: '0',
      MQTT_TLS_PORT: '0',
      API_KEYS_FILE: keysFile,
      AUTH_FAILURE_DELAY_MAX_MS: '300',
      DURABILITY: 'power-loss',
    });
    url = `mqtt://127.0.0.1:${gw.gateway.mqttPort}`;
    tlsUrl = `mqtts://127.0.0.1:${gw.gateway.mqttTlsPort}`;
  });
  afterAll(() => gw?.stop());

  it('acknowledges a QoS 1 publish only once its reading is committed, and delivers it to QuestDB', async () => {
    const client = await mqttClient(url, { username: 'pump-7', password: TEST_KEY, protocolVersion: 4 });
    const before = committedReadings(gw.dataDir);
    const seenAtAck: number[] = [];
    for (let i = 0; i < 5; i++) {
      expect(await publish(client, 'harbor/v1/pump-7/pressure', String(1.5 + i), 1)).toBe(0);
      // Another connection to the file sees the reading the moment its PUBACK arrives.
      seenAtAck.push(committedReadings(gw.dataDir) - before);
    }
    expect(seenAtAck).toEqual([1, 2, 3, 4, 5]);
    await endClient(client);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'pump-7'`, 5)).toBe(5);
  });

  it('takes the HTTP bodies on harbor/v1/ingest and {"value","time"} on a reading topic, over 3.1.1 and 5', async () => {
    for (const protocolVersion of [4, 5] as const) {
      const ship = `body-${protocolVersion}`;
      const client = await mqttClient(url, { username: ship, password: TEST_KEY, protocolVersion });
      const single = { time: TIME, ship_id: ship, cargo_id: 'single', value: 1 };
      const batch = [2, 3, 4].map((value, i) => ({ time: TIME, ship_id: ship, cargo_id: `batch-${i}`, value }));
      expect(await publish(client, 'harbor/v1/ingest', JSON.stringify(single), 1)).toBe(0);
      expect(await publish(client, 'harbor/v1/ingest', JSON.stringify(batch), 1)).toBe(0);
      expect(await publish(client, `harbor/v1/${ship}/object`, `{"value": -0, "time": "${TIME}"}`, 1)).toBe(0);
      expect(await publish(client, `harbor/v1/${ship}/qos2`, '7', 2)).toBe(0);
      expect(await publish(client, `harbor/v1/${ship}/qos0`, '8', 0)).toBe(0);
      await endClient(client);
      expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = '${ship}'`, 7)).toBe(7);
    }
    const rows = await sql<[string, number]>(`SELECT cargo_id, value FROM "${gw.table}" WHERE ship_id = 'body-5' ORDER BY cargo_id`);
    expect(rows.dataset).toEqual([
      ['batch-0', 2],
      ['batch-1', 3],
      ['batch-2', 4],
      ['object', -0],
      ['qos0', 8],
      ['qos2', 7],
      ['single', 1],
    ]);
  });

  it('tells an MQTT 5 client why a publish is refused, with a reason code, and stores nothing of it', async () => {
    const client = await mqttClient(url, { username: 'refused', password: TEST_KEY, protocolVersion: 5 });
    expect(await publish(client, 'harbor/v1/ingest', '{"ship_id":', 1)).toBe(0x99);
    expect(await publish(client, 'harbor/v1/refused/x', 'nan', 1)).toBe(0x99);
    expect(await publish(client, 'harbor/v1/elsewhere', '1', 1)).toBe(0x90);
    expect(
      await publish(
        client,
        'harbor/v1/ingest',
        JSON.stringify([{ ship_id: 'refused', cargo_id: 'a', value: 1 }, { ship_id: 'refused' }]),
        1,
      ),
    ).toBe(0x99);
    await endClient(client);
    const crane = await mqttClient(url, { username: 'crane', password: CRANE_KEY, protocolVersion: 5 });
    expect(await publish(crane, 'harbor/v1/truck-1/load', '1', 1)).toBe(0x87);
    expect(await publish(crane, 'harbor/v1/crane-1/load', '2', 1)).toBe(0);
    await endClient(crane);
    expect(ingestDeadLetters(gw.dataDir)).toEqual([]);
  });

  it('refuses a topic name with a wildcard: MQTT 5 with 0x90, 3.1.1 by closing; nothing stored, no dead letter', async () => {
    const before = committedReadings(gw.dataDir);
    const v5 = await mqttClient(url, { username: 'wild-5', password: TEST_KEY, protocolVersion: 5 });
    expect(await publish(v5, 'harbor/v1/+/temp', '1', 1)).toBe(0x90);
    expect(await publish(v5, 'harbor/v1/wild-5/#', '2', 2)).toBe(0x90);
    expect(await publish(v5, 'harbor/v1/wild-5/temp', '3', 1)).toBe(0);
    const disconnected = new Promise<number | undefined>((resolve) => v5.once('disconnect', (packet) => resolve(packet.reasonCode)));
    await publish(v5, 'harbor/v1/+/temp', '4', 0);
    expect(await disconnected).toBe(0x90);
    v5.end(true);

    const v4 = await mqttClient(url, { username: 'wild-4', password: TEST_KEY, protocolVersion: 4 });
    const closed = new Promise<void>((resolve) => v4.once('close', () => resolve()));
    v4.on('error', () => undefined);
    v4.publish('harbor/v1/+/temp', '5', { qos: 1 }, () => undefined);
    await closed;
    v4.end(true);

    expect(committedReadings(gw.dataDir) - before).toBe(1);
    expect(ingestDeadLetters(gw.dataDir).filter((l) => l.line.includes('+') || l.reason.includes('+'))).toEqual([]);
    await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'wild-5'`, 1);
    expect((await sql<[number]>(`SELECT count() FROM "${gw.table}" WHERE ship_id IN ('+', '#', 'wild-4')`)).dataset[0]![0]).toBe(0);
  });

  it('acknowledges a refused MQTT 3.1.1 publish and keeps it as a dead letter with the reason, counted per key', async () => {
    const crane = await mqttClient(url, { username: 'crane', password: CRANE_KEY, protocolVersion: 4 });
    expect(await publish(crane, 'harbor/v1/truck-2/load', '3', 1)).toBe(0);
    expect(await publish(crane, 'harbor/v1/crane-2/load', 'ON', 1)).toBe(0);
    expect(await publish(crane, 'harbor/v1/crane-2/load', '{"value":5,"time":"yesterday"}', 0)).toBe(0);
    await endClient(crane);
    const letters = ingestDeadLetters(gw.dataDir);
    expect(letters).toHaveLength(3);
    expect(letters.every((l) => l.sink === 'mqtt')).toBe(true);
    expect(letters[0]!.reason).toMatch(/key "crane".*truck-2.*may only send readings of ships starting with "crane-"/);
    // The refused reading was valid: kept as a record line, so an operator can re-queue it.
    expect(letters[0]!.line).toMatch(/^\d+\ttruck-2\tload\t3$/);
    expect(letters[1]!.reason).toMatch(/payload\.value: Input should be a number/);
    expect(letters[1]!.line).toBe('ON');
    expect(letters[2]!.reason).toMatch(/payload\.time/);
    const status = (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
      mqtt: { deadLettered: { key: string; count: number }[] };
      keys: { name: string; refusedRequests: number }[];
    };
    expect(status.mqtt.deadLettered).toEqual([{ key: 'crane', count: 3 }]);
    expect(status.keys.find((k) => k.name === 'crane')!.refusedRequests).toBeGreaterThanOrEqual(4);
  });

  it('refuses a wrong password after the wrong-key delay and a missing one, keeping nothing open', async () => {
    const started = Date.now();
    await expect(mqttClient(url, { username: 'x', password: 'not-a-key', protocolVersion: 4 })).rejects.toMatchObject({ code: 4 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    await expect(mqttClient(url, { username: 'x', password: 'not-a-key', protocolVersion: 5 })).rejects.toMatchObject({ code: 0x86 });
    await expect(mqttClient(url, { protocolVersion: 4 })).rejects.toMatchObject({ code: 5 });
    await expect(mqttClient(url, { protocolVersion: 5 })).rejects.toMatchObject({ code: 0x87 });
  });

  it('speaks TLS on its TLS port and on the plain port, told apart by the first byte', async () => {
    for (const [address, ship] of [
      [tlsUrl, 'tls-port'],
      [url.replace('mqtt:', 'mqtts:'), 'sniffed'],
    ] as const) {
      const client = await mqttClient(address, { username: ship, password: TEST_KEY });
      expect(await publish(client, `harbor/v1/${ship}/t`, '1', 1)).toBe(0);
      await endClient(client);
    }
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id IN ('tls-port', 'sniffed')`, 2)).toBe(2);
  });
});

describe('MQTT with a full queue', () => {
  let gw: TestGateway;
  // Nothing delivers: QuestDB is a closed port, so the 1 MiB queue fills and stays full.
  beforeAll(async () => {
    gw = await startTestGateway({
      MQTT: 'on',
      MQTT_PORT: '0',
      MQTT_TLS_PORT: '0',
      QUEUE_MAX_BYTES: '1MiB',
      QUESTDB_URL: 'http://127.0.0.1:9',
    });
  });
  afterAll(() => gw?.stop());

  it('stops acknowledging rather than losing: no PUBACK, DISCONNECT 0x97, CONNECT refused while full; every PUBACKed reading is queued', async () => {
    const client = await mqttClient(`mqtt://127.0.0.1:${gw.gateway.mqttPort}`, {
      username: 'full',
      password: TEST_KEY,
      protocolVersion: 5,
    });
    const disconnected = new Promise<number | undefined>((resolve) => client.once('disconnect', (packet) => resolve(packet.reasonCode)));
    const batch = (n: number) => JSON.stringify(Array.from({ length: 500 }, (_, i) => ({ ship_id: 'full', cargo_id: `c${i}`, value: n })));
    let acknowledged = 0;
    for (let n = 0; n < 200 && client.connected; n++) {
      const code = await Promise.race([publish(client, 'harbor/v1/ingest', batch(n), 1), disconnected.then(() => -1)]);
      if (code === 0) acknowledged += 500;
    }
    expect(await disconnected).toBe(0x97);
    expect(acknowledged).toBeGreaterThan(0);
    expect(gw.gateway.queue.stats().readings).toBe(acknowledged);
    await expect(
      mqttClient(`mqtt://127.0.0.1:${gw.gateway.mqttPort}`, { username: 'full', password: TEST_KEY, protocolVersion: 5 }),
    ).rejects.toMatchObject({
      code: 0x97,
    });
    client.end(true);
  });
});
