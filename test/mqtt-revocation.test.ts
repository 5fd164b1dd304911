// A key revoked, or narrowed, while MQTT sessions are open on it: each session ends within 2 s
// (MQTT 5 with DISCONNECT 0x87, 3.1.1 by closing), and no reading published after the change is
// stored, from well-behaved clients (MQTT.js) and from one that ignores the DISCONNECT and goes on
// sending. Revoked with the CLI (which returns once the gateway applied it), in the console, and
// by an edit of the key file.
import { execFile } from 'node:child_process';
import { connect as connectTcp } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { MqttClient } from 'mqtt';
import { generate, type Packet, parser } from 'mqtt-packet';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readKeyFile, writeKeyFile } from '../src/keys/key-file.js';
import { ConsoleClient } from './support/console-client.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { mqttClient } from './support/mqtt.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

const run = promisify(execFile);
const PASSWORD = 'revocation-console-password-0123';
/** The promise: an open session ends this soon after the change. */
const WITHIN_MS = 2000;

let gw: TestGateway;
let keysFile: string;
let port: number;

beforeAll(async () => {
  gw = await startTestGateway({
    MQTT: 'on',
    MQTT_PORT: '0',
    MQTT_TLS_PORT: '0',
    CONSOLE_PASSWORD: PASSWORD,
    AUTH_FAILURE_DELAY_MAX_MS: '200',
  });
  keysFile = join(gw.dataDir, 'api-keys');
  port = gw.gateway.mqttPort!;
});
afterAll(() => gw?.stop());

/** The keys command of the built bundle on the gateway's data directory, as an operator runs it. */
const keys = (...args: string[]) =>
  run(process.execPath, [inject('bundlePath'), 'keys', ...args], { env: { PATH: process.env['PATH'] ?? '', DATA_DIR: gw.dataDir } });

async function addKey(name: string, ...options: string[]): Promise<string> {
  const added = await keys('add', name, ...options);
  expect(added.stderr).toMatch(/has applied it/);
  return added.stdout.trim();
}

interface Publisher {
  /** When each value was handed to the client. */
  sentAt: Map<number, number>;
  /** When the connection closed. */
  closed: Promise<number>;
  /** The reason of the server's DISCONNECT (MQTT 5), if one came. */
  disconnectReason: () => number | undefined;
  stop(): void;
}

/** Publishes 1, 2, 3, … every 15 ms on the ship's topic while the client is connected. */
function publishSteadily(client: MqttClient, ship: string, qos: 0 | 1): Publisher {
  const sentAt = new Map<number, number>();
  let value = 0;
  let reason: number | undefined;
  client.on('disconnect', (packet) => {
    reason = packet.reasonCode;
  });
  client.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => client.once('close', () => resolve(Date.now())));
  const timer = setInterval(() => {
    if (!client.connected) return;
    value += 1;
    sentAt.set(value, Date.now());
    client.publish(`harbor/v1/${ship}/level`, String(value), { qos }, () => undefined);
  }, 15);
  return {
    sentAt,
    closed,
    disconnectReason: () => reason,
    stop: () => {
      clearInterval(timer);
      client.end(true);
    },
  };
}

/**
 * A client that reads nothing the gateway says: CONNECT, then a QoS 1 PUBLISH every 10 ms until
 * the gateway closes the connection, whatever DISCONNECT came before.
 */
function stubbornClient(key: string, ship: string, version: 4 | 5): Publisher & { packets: Packet[] } {
  const socket = connectTcp(port, '127.0.0.1');
  const packets: Packet[] = [];
  const read = parser({ protocolVersion: version });
  read.on('packet', (packet: Packet) => packets.push(packet));
  socket.on('data', (chunk) => read.parse(chunk));
  socket.on('error', () => undefined);
  const sentAt = new Map<number, number>();
  let value = 0;
  let timer: NodeJS.Timeout | undefined;
  socket.once('connect', () => {
    socket.write(
      generate(
        {
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: version,
          clientId: `stubborn-${ship}`,
          clean: true,
          keepalive: 60,
          username: ship,
          password: Buffer.from(key),
        },
        { protocolVersion: version },
      ),
    );
    timer = setInterval(() => {
      if (socket.destroyed || !socket.writable) return;
      value += 1;
      sentAt.set(value, Date.now());
      socket.write(
        generate(
          {
            cmd: 'publish',
            topic: `harbor/v1/${ship}/level`,
            payload: Buffer.from(String(value)),
            qos: 1,
            messageId: (value % 60000) + 1,
            dup: false,
            retain: false,
          },
          { protocolVersion: version },
        ),
      );
    }, 10);
  });
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => {
      clearInterval(timer);
      resolve(Date.now());
    }),
  );
  return {
    sentAt,
    closed,
    packets,
    disconnectReason: () => (packets.find((p) => p.cmd === 'disconnect') as { reasonCode?: number } | undefined)?.reasonCode,
    stop: () => {
      clearInterval(timer);
      socket.destroy();
    },
  };
}

/** The values of a ship the gateway stored, once everything queued is in QuestDB. */
async function storedValues(ship: string): Promise<number[]> {
  await waitForDrained(gw);
  await waitForWalApplied(gw.table);
  return (await sql<[number]>(`SELECT value FROM "${gw.table}" WHERE ship_id = '${ship}' ORDER BY value`)).dataset.map(([v]) => v);
}

/** Until `count` readings of the publisher were acknowledged or queued: the session is storing. */
async function storing(publisher: Publisher, count = 5): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (publisher.sentAt.size < count) {
    if (Date.now() > deadline) throw new Error('the publisher did not get going');
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 100));
}

/** When the gateway next applies a change of the keys (an edit of the file is seen by its watch). */
function nextApplied(): Promise<number> {
  return new Promise((resolve) => {
    const stop = gw.gateway.keys.onChange(() => {
      stop();
      resolve(Date.now());
    });
  });
}

/**
 * The session ended within WITHIN_MS of `changedAt`, and nothing sent at or after `changedAt` was
 * stored (for an edit of the file, `changedAt` is when the gateway applied it, at most WITHIN_MS later).
 */
async function expectEndedAndNothingLater(
  publisher: Publisher,
  ship: string,
  changedAt: number,
  reason: number | undefined,
): Promise<void> {
  const closedAt = await Promise.race([publisher.closed, new Promise<number>((r) => setTimeout(() => r(Number.NaN), WITHIN_MS + 3000))]);
  publisher.stop();
  expect(closedAt - changedAt).toBeLessThanOrEqual(WITHIN_MS);
  expect(publisher.disconnectReason()).toBe(reason);
  const stored = await storedValues(ship);
  expect(stored.length).toBeGreaterThan(0);
  const late = stored.filter((value) => (publisher.sentAt.get(value) ?? Number.POSITIVE_INFINITY) >= changedAt);
  expect(late).toEqual([]);
}

describe('a key revoked with the CLI', () => {
  it('ends its open sessions before the command returns (3.1.1 QoS 1, MQTT 5 QoS 0), storing nothing published after', async () => {
    const key = await addKey('cli-dev');
    const v4 = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'cli-v4', password: key, protocolVersion: 4 }),
      'cli-v4',
      1,
    );
    const v5 = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'cli-v5', password: key, protocolVersion: 5 }),
      'cli-v5',
      0,
    );
    await Promise.all([storing(v4), storing(v5)]);
    const revoked = await keys('revoke', 'cli-dev');
    const revokedAt = Date.now();
    expect(revoked.stderr).toMatch(/key cli-dev revoked\n[\s\S]*has applied it/);
    await expectEndedAndNothingLater(v4, 'cli-v4', revokedAt, undefined);
    await expectEndedAndNothingLater(v5, 'cli-v5', revokedAt, 0x87);
    await expect(mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'cli-v4', password: key, protocolVersion: 4 })).rejects.toMatchObject({
      code: 4,
    });
  });

  it('stores nothing more from a client that ignores its DISCONNECT and goes on publishing', async () => {
    const key = await addKey('stubborn-dev');
    const stubborn = stubbornClient(key, 'stubborn-v5', 5);
    await storing(stubborn, 20);
    // Its key is revoked by the file's owner editing it, not through the command: the watch applies it.
    const applied = nextApplied();
    const writtenAt = Date.now();
    writeKeyFile(
      keysFile,
      readKeyFile(keysFile).entries.filter((e) => e.name !== 'stubborn-dev'),
    );
    const revokedAt = await applied;
    expect(revokedAt - writtenAt).toBeLessThan(WITHIN_MS);
    await expectEndedAndNothingLater(stubborn, 'stubborn-v5', revokedAt, 0x87);
  });
});

describe('a key revoked in the console', () => {
  it('ends its open sessions before the page answers (3.1.1 QoS 0, MQTT 5 QoS 1), storing nothing published after', async () => {
    const key = await addKey('console-dev');
    const v4 = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'con-v4', password: key, protocolVersion: 4 }),
      'con-v4',
      0,
    );
    const v5 = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'con-v5', password: key, protocolVersion: 5 }),
      'con-v5',
      1,
    );
    await Promise.all([storing(v4), storing(v5)]);
    const browser = new ConsoleClient(gw.url);
    expect((await browser.login(PASSWORD)).status).toBe(303);
    await browser.request('/console/keys');
    const answer = await browser.post('/console/keys/revoke', [
      ['name', 'console-dev'],
      ['confirm', 'yes'],
    ]);
    const revokedAt = Date.now();
    expect(answer.status).toBe(303);
    await expectEndedAndNothingLater(v4, 'con-v4', revokedAt, undefined);
    await expectEndedAndNothingLater(v5, 'con-v5', revokedAt, 0x87);
  });
});

describe('a key whose ship prefix or site changed', () => {
  it('ends the sessions it no longer allows and keeps the one it does', async () => {
    const craneKey = await addKey('crane', '--ship-prefix', 'crane-');
    const siteKey = await addKey('pier', '--site', 'Pier 4');
    // Sent crane-a…: a prefix crane-b does not allow it.
    const narrowed = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'crane-a', password: craneKey, protocolVersion: 5 }),
      'crane-a1',
      1,
    );
    // Sent crane-b…: still allowed.
    const kept = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'crane-b', password: craneKey, protocolVersion: 4 }),
      'crane-b1',
      1,
    );
    const moved = publishSteadily(
      await mqttClient(`mqtt://127.0.0.1:${port}`, { username: 'pier', password: siteKey, protocolVersion: 4 }),
      'pier-1',
      1,
    );
    await Promise.all([storing(narrowed), storing(kept), storing(moved)]);
    const applied = nextApplied();
    const writtenAt = Date.now();
    writeKeyFile(
      keysFile,
      readKeyFile(keysFile).entries.map((e) =>
        e.name === 'crane' ? { ...e, shipPrefix: 'crane-b' } : e.name === 'pier' ? { ...e, site: 'Pier 5' } : e,
      ),
    );
    const changedAt = await applied;
    expect(changedAt - writtenAt).toBeLessThan(WITHIN_MS);
    await expectEndedAndNothingLater(narrowed, 'crane-a1', changedAt, 0x87);
    await expectEndedAndNothingLater(moved, 'pier-1', changedAt, undefined);
    const sentBefore = kept.sentAt.size;
    await new Promise((r) => setTimeout(r, 500));
    expect(kept.sentAt.size).toBeGreaterThan(sentBefore);
    kept.stop();
    const stored = await storedValues('crane-b1');
    expect(stored.some((value) => kept.sentAt.get(value)! > changedAt)).toBe(true);
  });
});
