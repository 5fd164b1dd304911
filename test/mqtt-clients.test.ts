import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MOSQUITTO_PUB, installMosquitto } from '../scripts/lib/mosquitto.mjs';
import { pahoPython } from '../scripts/lib/paho.mjs';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForCount } from './support/questdb-sql.js';

const run = promisify(execFile);

/** Publishes with paho-mqtt (QoS 1, waiting for the PUBACK) as a Python device would; prints the outcome. */
const PAHO_SCRIPT = `
import sys, paho.mqtt.client as mqtt
port, version, key, ship = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
protocol = mqtt.MQTTv5 if version == '5' else mqtt.MQTTv311
client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id='paho-' + ship, protocol=protocol)
client.username_pw_set(ship, key)
rc = client.connect('127.0.0.1', port, keepalive=30)
client.loop_start()
infos = [client.publish('harbor/v1/%s/level' % ship, str(i), qos=1) for i in range(20)]
infos.append(client.publish('harbor/v1/ingest', '[{"ship_id":"%s","cargo_id":"batch","value":1},{"ship_id":"%s","cargo_id":"batch2","value":2}]' % (ship, ship), qos=1))
for info in infos:
    info.wait_for_publish(timeout=20)
print('published', sum(1 for info in infos if info.is_published()))
client.disconnect()
client.loop_stop()
`;

/**
 * The packets of an ESP board's Arduino PubSubClient: MQTT 3.1.1 CONNECT (clean session, keep-alive
 * 15 s, user and password), QoS 0 PUBLISH only (PubSubClient has no QoS 1 publish), PINGREQ,
 * DISCONNECT, all within its default 256-byte buffer.
 */
class PubSubClientShaped {
  #socket!: Socket;
  #received = Buffer.alloc(0);

  async connect(port: number, clientId: string, user: string, password: string): Promise<number> {
    this.#socket = connect(port, '127.0.0.1');
    this.#socket.on('data', (chunk: Buffer) => (this.#received = Buffer.concat([this.#received, chunk])));
    await new Promise((resolve) => this.#socket.once('connect', resolve));
    const string = (text: string) => {
      const bytes = Buffer.from(text);
      return Buffer.concat([Buffer.from([bytes.length >> 8, bytes.length & 0xff]), bytes]);
    };
    const variable = Buffer.concat([string('MQTT'), Buffer.from([4, 0b1100_0010, 0, 15])]);
    const payload = Buffer.concat([string(clientId), string(user), string(password)]);
    this.#write(0x10, Buffer.concat([variable, payload]));
    const connack = await this.#read(4);
    return connack[3]!;
  }

  publish(topic: string, payload: string): void {
    const name = Buffer.from(topic);
    this.#write(0x30, Buffer.concat([Buffer.from([name.length >> 8, name.length & 0xff]), name, Buffer.from(payload)]));
  }

  async ping(): Promise<boolean> {
    this.#write(0xc0, Buffer.alloc(0));
    const answer = await this.#read(2);
    return answer[0] === 0xd0;
  }

  disconnect(): void {
    this.#write(0xe0, Buffer.alloc(0));
    this.#socket.end();
  }

  #write(type: number, body: Buffer): void {
    if (body.length + 2 > 256) throw new Error('PubSubClient would not send this: over its 256-byte buffer');
    this.#socket.write(Buffer.concat([Buffer.from([type, body.length]), body]));
  }

  async #read(bytes: number): Promise<Buffer> {
    const deadline = Date.now() + 10_000;
    while (this.#received.length < bytes) {
      if (Date.now() > deadline) throw new Error('no answer');
      await new Promise((r) => setTimeout(r, 10));
    }
    const answer = this.#received.subarray(0, bytes);
    this.#received = this.#received.subarray(bytes);
    return answer;
  }
}

describe('real MQTT clients against the gateway', () => {
  let gw: TestGateway;
  let port: number;
  let python: string;

  beforeAll(async () => {
    installMosquitto();
    python = pahoPython();
    gw = await startTestGateway({ MQTT: 'on', MQTT_PORT: '0', MQTT_TLS_PORT: '0', AUTH_FAILURE_DELAY_MAX_MS: '200' });
    port = gw.gateway.mqttPort!;
  }, 600_000);
  afterAll(() => gw?.stop());

  it('mosquitto_pub: QoS 1 over MQTT 3.1.1, 5 and TLS; a wrong password is refused', async () => {
    const base = ['-h', '127.0.0.1', '-u', 'mosq', '-P', TEST_KEY, '-q', '1'];
    await run(MOSQUITTO_PUB, [...base, '-p', String(port), '-t', 'harbor/v1/mosq/v311', '-m', '21.5']);
    await run(MOSQUITTO_PUB, [...base, '-p', String(port), '-V', 'mqttv5', '-t', 'harbor/v1/mosq/v5', '-m', '{"value":22.5}']);
    // The gateway's self-signed certificate, as a technician copies it onto a device.
    const tls = ['--cafile', join(gw.dataDir, 'tls', 'cert.pem'), '--insecure'];
    await run(MOSQUITTO_PUB, [...base, ...tls, '-p', String(gw.gateway.mqttTlsPort), '-t', 'harbor/v1/mosq/tls', '-m', '23.5']);
    // One reading a line: `-l` publishes each line of its input as a message.
    const lines = execFile(MOSQUITTO_PUB, [...base, '-p', String(port), '-t', 'harbor/v1/mosq/lines', '-l']);
    lines.stdin?.end('1\n2\n3\n');
    await new Promise((resolve) => lines.once('exit', resolve));
    await expect(
      run(MOSQUITTO_PUB, ['-h', '127.0.0.1', '-p', String(port), '-u', 'mosq', '-P', 'wrong', '-t', 'harbor/v1/mosq/x', '-m', '1']),
    ).rejects.toMatchObject({
      stderr: expect.stringMatching(/bad user name or password/i),
    });
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'mosq'`, 6)).toBe(6);
  });

  it('paho-mqtt (Python): every QoS 1 publish acknowledged and stored, MQTT 3.1.1 and 5', async () => {
    for (const version of ['3', '5']) {
      const ship = `paho-${version}`;
      const { stdout } = await run(python, ['-c', PAHO_SCRIPT, String(port), version, TEST_KEY, ship]);
      expect(stdout.trim()).toBe('published 21');
      expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = '${ship}'`, 22)).toBe(22);
    }
  });

  it('a PubSubClient-shaped ESP device: QoS 0 publishes are stored, nothing acknowledges them', async () => {
    const device = new PubSubClientShaped();
    expect(await device.connect(port, 'esp32-abc', 'esp32-abc', TEST_KEY)).toBe(0);
    for (let i = 0; i < 10; i++) device.publish('harbor/v1/esp32-abc/temperature', String(20 + i / 10));
    expect(await device.ping()).toBe(true);
    device.disconnect();
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'esp32-abc'`, 10)).toBe(10);
    const values = await sql<[number]>(`SELECT value FROM "${gw.table}" WHERE ship_id = 'esp32-abc' ORDER BY time`);
    expect(values.dataset.map(([v]) => v)).toEqual([20, 20.1, 20.2, 20.3, 20.4, 20.5, 20.6, 20.7, 20.8, 20.9]);
  });
});
