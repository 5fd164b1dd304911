import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { generate } from 'mqtt-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_KEY } from './support/gateway.js';
import { endClient, mqttClient, publish } from './support/mqtt.js';
import { gatewayEnv, memoryOf, spawnGateway, type GatewayProcess } from './support/process.js';

let gw: GatewayProcess;
let port: number;
const MAX_PACKET = 8 * 1024;

beforeAll(async () => {
  gw = await spawnGateway(
    gatewayEnv('mqtt-hostile', {
      MQTT: 'on',
      MQTT_PORT: '0',
      MQTT_TLS_PORT: '0',
      MQTT_MAX_PACKET_BYTES: String(MAX_PACKET),
      MQTT_MAX_INFLIGHT: '16',
      HEADERS_TIMEOUT_MS: '1000',
      REQUEST_TIMEOUT_MS: '1500',
      MAX_CONNECTIONS: '400',
      AUTH_FAILURE_DELAY_MAX_MS: '400',
    }),
  );
  const started = gw.logs.find((line) => line.event === 'mqtt_started') as { address: string } | undefined;
  port = Number(started!.address.split(':').pop());
});
afterAll(async () => {
  gw.child.kill('SIGTERM');
  expect((await gw.exited).code).toBe(0);
});

const MAX_PEAK_RSS_MB = 200;
const memory = () => memoryOf(gw.child.pid!);

const connectPacket = (password = TEST_KEY, protocolVersion: 4 | 5 = 4) =>
  generate({
    cmd: 'connect',
    protocolId: 'MQTT',
    protocolVersion,
    clientId: '',
    clean: true,
    keepalive: 30,
    username: 'h',
    password: Buffer.from(password),
  });

/** A raw connection: sends, then resolves with what came back once the gateway closed it. */
function exchange(send: (socket: Socket) => void, timeoutMs = 5000): Promise<{ data: Buffer; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => send(socket));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ data: Buffer.concat(chunks), closedAfterMs: Date.now() - started }));
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`the gateway kept the connection open for ${timeoutMs} ms`));
    }, timeoutMs);
  });
}

/** HTTP ingest's figures meanwhile: requests answered per second and their statuses, from 4 clients. */
async function httpLoad(ms: number): Promise<{ perSecond: number; statuses: Record<number, number> }> {
  const statuses: Record<number, number> = {};
  const until = Date.now() + ms;
  let count = 0;
  let n = 0;
  const client = async () => {
    while (Date.now() < until) {
      const body = JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ ship_id: 'http', cargo_id: `c${i}`, value: n++ })));
      const response = await fetch(`${gw.url}/api/v2/ingest/batch`, { method: 'POST', headers: { 'x-api-key': TEST_KEY }, body });
      await response.arrayBuffer();
      statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      count += 1;
    }
  };
  await Promise.all([client(), client(), client(), client()]);
  return { perSecond: count / (ms / 1000), statuses };
}

/** 600 connections, 50 at a time: wrong keys, CONNECT and close, a 268 MB length, connect and drop. */
const ATTACKER = `
import { connect } from 'node:net';
const [port, good, wrong] = process.argv.slice(1);
const sends = [Buffer.from(wrong, 'hex'), Buffer.from(good, 'hex'), Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f]), null];
const one = (i) => new Promise((resolve) => {
  const socket = connect(Number(port), '127.0.0.1', () => {
    const bytes = sends[i % 4];
    if (bytes === null) socket.destroy();
    else if (i % 4 === 1) socket.end(bytes);
    else socket.write(bytes);
  });
  socket.on('data', () => undefined);
  socket.on('error', () => undefined);
  socket.on('close', resolve);
  setTimeout(() => socket.destroy(), 10000);
});
for (let round = 0; round < 12; round++) await Promise.all(Array.from({ length: 50 }, (_, i) => one(round * 50 + i)));
`;

const CORPUS: [string, (socket: Socket) => void, (data: Buffer) => void][] = [
  ['a reserved packet type (0)', (s) => s.write(Buffer.from([0x00, 0x00])), (d) => expect(d.length).toBe(0)],
  [
    'a PUBLISH with both QoS bits set',
    (s) => s.write(Buffer.concat([connectPacket(), Buffer.from([0x36, 0x03, 0x00, 0x01, 0x61])])),
    () => undefined,
  ],
  [
    'a SUBSCRIBE with the wrong flags',
    (s) => s.write(Buffer.concat([connectPacket(), Buffer.from([0x80, 0x02, 0x00, 0x01])])),
    () => undefined,
  ],
  ['a remaining length of 268 MB announced', (s) => s.write(Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f])), (d) => expect(d.length).toBe(0)],
  [
    'a remaining length longer than four bytes',
    (s) => s.write(Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0x01])),
    (d) => expect(d.length).toBe(0),
  ],
  [
    'a PUBLISH before CONNECT',
    (s) => s.write(generate({ cmd: 'publish', topic: 'harbor/v1/a/b', payload: '1', qos: 0, dup: false, retain: false })),
    (d) => expect(d.length).toBe(0),
  ],
  ['a second CONNECT', (s) => s.write(Buffer.concat([connectPacket(), connectPacket()])), (d) => expect(d[0]).toBe(0x20)],
  [
    'an unknown protocol version',
    (s) => s.write(Buffer.from([0x10, 0x0c, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x09, 0x02, 0x00, 0x1e, 0x00, 0x00])),
    (d) => expect([...d]).toEqual([0x20, 0x02, 0x00, 0x01]),
  ],
  ['a CONNECT with a truncated string', (s) => s.write(Buffer.from([0x10, 0x06, 0x00, 0x09, 0x4d, 0x51, 0x54, 0x54])), () => undefined],
  [
    'a packet over MQTT_MAX_PACKET_BYTES',
    (s) =>
      s.write(
        Buffer.concat([
          connectPacket(),
          generate({ cmd: 'publish', topic: 'harbor/v1/a/b', payload: Buffer.alloc(MAX_PACKET), qos: 0, dup: false, retain: false }),
        ]),
      ),
    (d) => expect(d[0]).toBe(0x20),
  ],
  [
    'a 60,000-character topic (over the packet limit)',
    (s) =>
      s.write(
        Buffer.concat([
          connectPacket(),
          generate({
            cmd: 'publish',
            topic: `harbor/v1/${'x'.repeat(60_000)}/b`,
            payload: '1',
            qos: 1,
            messageId: 1,
            dup: false,
            retain: false,
          }),
        ]),
      ),
    () => undefined,
  ],
  ['random bytes', (s) => s.write(Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 256))), () => undefined],
];

describe('hostile MQTT clients', () => {
  it.each(CORPUS)('closes the connection on %s', async (_name, send, check) => {
    const { data } = await exchange(send);
    check(data);
  });

  it('closes a client that never sends CONNECT after HEADERS_TIMEOUT_MS, and one that stalls mid-packet after REQUEST_TIMEOUT_MS', async () => {
    const silent = await exchange(() => undefined);
    expect(silent.closedAfterMs).toBeGreaterThanOrEqual(900);
    const stalled = await exchange((s) => s.write(Buffer.concat([connectPacket(), Buffer.from([0x30, 0x7f, 0x00])])));
    expect(stalled.closedAfterMs).toBeGreaterThanOrEqual(1400);
  });

  it('tells an MQTT 5 client a packet is too large (0x95) before reading it', async () => {
    const { data } = await exchange((s) => {
      s.write(connectPacket(TEST_KEY, 5));
      s.write(Buffer.from([0x30, 0xff, 0xff, 0x7f]));
    });
    // CONNACK, then DISCONNECT with reason 0x95.
    const disconnect = data.subarray(data.indexOf(0xe0));
    expect(disconnect[0]).toBe(0xe0);
    expect(disconnect[2]).toBe(0x95);
  });

  it('stays up and keeps HTTP ingest answering through CONNECT floods, wrong passwords and garbage, memory bounded', async () => {
    const baseline = await httpLoad(3000);
    // From a process of its own, so the attacker's work is not the HTTP clients' loss.
    const attack = () =>
      new Promise<void>((resolve, reject) => {
        const child = execFile(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            ATTACKER,
            String(port),
            connectPacket().toString('hex'),
            connectPacket('wrong-key').toString('hex'),
          ],
          {
            timeout: 60_000,
          },
        );
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`attacker exited ${code}`))));
      });
    const [during] = await Promise.all([httpLoad(5000), attack()]);
    expect(Object.keys(during.statuses)).toEqual(['200']);
    expect(Object.keys(baseline.statuses)).toEqual(['200']);
    // Loose on a shared machine: the attack must not starve HTTP.
    expect(during.perSecond, `HTTP batches per second: ${baseline.perSecond} before, ${during.perSecond} during`).toBeGreaterThan(
      baseline.perSecond * 0.3,
    );
    // A device with a good key is served at once meanwhile, whatever its address did.
    const client = await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'good', password: TEST_KEY });
    expect(await publish(client, 'harbor/v1/good/x', '1', 1)).toBe(0);
    await endClient(client);
    expect(memory().peak).toBeLessThan(MAX_PEAK_RSS_MB);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  }, 60_000);

  it('refuses a topic within the packet limit whose ship id is too long, with its reason (MQTT 5)', async () => {
    const client = await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'long', password: TEST_KEY, protocolVersion: 5 });
    expect(await publish(client, `harbor/v1/${'x'.repeat(2000)}/b`, '1', 1)).toBe(0x99);
    expect(await publish(client, 'harbor/v1/long/b', '1', 1)).toBe(0);
    await endClient(client);
  });

  it('reads a QoS 0 flood no faster than it commits: every publish stored, memory bounded', async () => {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.on('error', () => undefined);
    socket.write(connectPacket());
    const [connack] = (await once(socket, 'data')) as [Buffer];
    expect([...connack.subarray(0, 4)]).toEqual([0x20, 0x02, 0x00, 0x00]);
    const thousand = Buffer.concat(
      Array.from({ length: 1000 }, (_, i) =>
        generate({ cmd: 'publish', topic: 'harbor/v1/flood/n', payload: String(i), qos: 0, dup: false, retain: false }),
      ),
    );
    const closed = once(socket, 'close');
    for (let i = 0; i < 200 && !socket.destroyed; i++) {
      if (!socket.write(thousand)) await Promise.race([once(socket, 'drain'), closed]);
    }
    // The gateway held the sender (it stopped reading) but never let it go.
    expect(socket.destroyed).toBe(false);
    socket.end(generate({ cmd: 'disconnect' }));
    await closed;
    const status = async () =>
      (
        (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
          mqtt: { publishes: { qos0: number } };
        }
      ).mqtt.publishes.qos0;
    const deadline = Date.now() + 60_000;
    while ((await status()) < 200_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await status()).toBeGreaterThanOrEqual(200_000);
    expect(memory().peak).toBeLessThan(MAX_PEAK_RSS_MB);
  }, 90_000);

  it('holds an MQTT 3.1.1 client at MQTT_MAX_INFLIGHT unacknowledged publishes by not reading it, and loses none', async () => {
    const client = await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'burst', password: TEST_KEY, protocolVersion: 4 });
    const codes = await Promise.all(Array.from({ length: 400 }, (_, i) => publish(client, 'harbor/v1/burst/n', String(i), 1)));
    expect(codes.every((c) => c === 0)).toBe(true);
    await endClient(client);
  });
});
