import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate, type Packet, parser } from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import { FailureDelay } from '../http/middleware/api-key/failure-delay.js';
import { InflightBudget } from '../http/inflight-budget.js';
import { type KeyEntry, writeKeyFile } from '../keys/key-file.js';
import { hashKey } from '../keys/key-hash.js';
import { KeyStore } from '../keys/key-store.js';
import { createLogger } from '../log/logger.js';
import { IngestDeadLetters } from '../queue/dead-letters.js';
import { QueueWriter } from '../queue/queue-writer.js';
import { ReceiveClock } from '../reading/receive-clock.js';
import { readingSchema } from '../reading/reading-schema.js';
import { GatewayStats, MqttStats } from '../stats.js';
import { DeviceSession, SessionTable } from './device-session.js';
import { MqttIngest } from './mqtt-ingest.js';

/** The socket a session is given, in memory: what the gateway writes is parsed back into packets. */
class MemorySocket extends EventEmitter {
  readonly remoteAddress = '192.168.1.50';
  destroyed = false;
  writable = true;
  ended = false;
  readonly received: Packet[] = [];
  /** Calls of write: packets that went out together count once. */
  writes = 0;
  readonly #parser;

  constructor(version: 4 | 5) {
    super();
    this.#parser = parser({ protocolVersion: version });
    this.#parser.on('packet', (packet: Packet) => this.received.push(packet));
  }

  send(packet: Packet, version: 4 | 5): void {
    this.emit('data', generate(packet, { protocolVersion: version }));
  }

  /** Packets in one chunk, as TCP delivers what a client wrote at once. */
  sendTogether(packets: Packet[], version: 4 | 5): void {
    this.emit('data', Buffer.concat(packets.map((packet) => generate(packet, { protocolVersion: version }))));
  }

  write(bytes: Buffer): boolean {
    this.writes += 1;
    this.#parser.parse(bytes);
    return true;
  }

  end(): void {
    this.ended = true;
    this.writable = false;
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.writable = false;
    queueMicrotask(() => this.emit('close'));
  }

  setNoDelay(): void {}
  setTimeout(): void {}
  pause(): void {}
  resume(): void {}
  cork(): void {}
  uncork(): void {}
}

const dirs: string[] = [];
const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const KEY = 'crane-key-0123456789abcdef';

function gateway(entries: (hash: string) => KeyEntry[]) {
  const dir = mkdtempSync(join(tmpdir(), 'harbor-session-'));
  dirs.push(dir);
  const hash = hashKey(KEY);
  const keysFile = join(dir, 'api-keys');
  writeKeyFile(keysFile, entries(hash));
  const logger = createLogger('silent');
  const keys = new KeyStore({ defaultKey: 'default-key-0123456789', path: keysFile, pollMs: 60_000, logger });
  const queue = QueueWriter.open({ dataDir: dir, durability: 'process-crash', maxBytes: 1 << 20 });
  const deadLetters = new IngestDeadLetters(dir, 'process-crash');
  closers.push(() => {
    deadLetters.close();
    queue.close();
  });
  const clock = new ReceiveClock();
  const ingest = new MqttIngest({
    queue,
    clock,
    stats: new GatewayStats(),
    keys,
    deadLetters,
    logger,
  });
  const deps = {
    keys,
    failureDelay: new FailureDelay(100, 60_000),
    stopping: new AbortController().signal,
    ingest,
    validator: { schema: readingSchema({ maxIdLength: 100 }), limits: { maxIdLength: 100 } },
    maxBatchReadings: 1000,
    config: { port: 0, tlsPort: 0, anonymous: false, maxPacketBytes: 1 << 20, maxInflight: 16, keepAliveMaxS: 60 },
    connectTimeoutMs: 10_000,
    packetTimeoutMs: 10_000,
    budget: new InflightBudget(1 << 20),
    stats: new MqttStats(),
    sessions: new SessionTable(),
    queue,
    // The connection gate's part: told that a connection showed a device key; nothing to hold here.
    gate: { prove: () => undefined },
    logger,
  };
  const setKeys = (next: (hash: string) => KeyEntry[]) => {
    writeKeyFile(keysFile, next(hash));
    keys.reload();
  };
  return { deps, queue, setKeys };
}

async function connected(deps: ConstructorParameters<typeof DeviceSession>[1], version: 4 | 5) {
  const socket = new MemorySocket(version);
  const session = new DeviceSession(socket as unknown as Socket, deps);
  socket.send(
    {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: version,
      clientId: 'c1',
      clean: true,
      keepalive: 30,
      username: 'crane-device',
      password: Buffer.from(KEY),
    },
    version,
  );
  await settled();
  expect(socket.received[0]).toMatchObject({ cmd: 'connack' });
  return { socket, session };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

const publish = (topic: string, value: string, qos: 0 | 1 | 2, messageId = 1): Packet => ({
  cmd: 'publish',
  topic,
  payload: Buffer.from(value),
  qos,
  dup: false,
  retain: false,
  ...(qos > 0 ? { messageId } : {}),
});

describe('an MQTT session acknowledges', () => {
  it('the publishes one commit stored in one write, in the order they came, after the commit', async () => {
    for (const version of [4, 5] as const) {
      const { deps, queue } = gateway((hash) => [{ name: 'crane', hash }]);
      const { socket } = await connected(deps, version);
      const before = socket.writes;
      const ids = [5, 3, 9, 1, 7, 2];
      socket.sendTogether(
        ids.map((id, i) => publish('harbor/v1/crane-1/load', String(i), id % 2 === 0 ? 2 : 1, id)),
        version,
      );
      // Nothing before the commit.
      expect(socket.received.length).toBe(1);
      await settled();
      expect(queue.stats()).toMatchObject({ commits: 1, readings: ids.length });
      expect(socket.writes - before).toBe(1);
      expect(socket.received.slice(1).map((p) => [p.cmd, 'messageId' in p ? p.messageId : undefined])).toEqual(
        ids.map((id) => [id % 2 === 0 ? 'pubrec' : 'puback', id]),
      );
    }
  });
});

describe('an MQTT session judges each PUBLISH by the keys as they are now', () => {
  it('stores nothing a revoked key publishes, even before the session is told of the change', async () => {
    for (const version of [4, 5] as const) {
      const { deps, queue, setKeys } = gateway((hash) => [{ name: 'crane', hash }]);
      const { socket } = await connected(deps, version);
      socket.send(publish('harbor/v1/crane-1/load', '1', 1), version);
      await settled();
      expect(queue.stats().readings).toBe(1);
      // The session is not among the key store's listeners here: only its own check can stop it.
      setKeys(() => []);
      socket.send(publish('harbor/v1/crane-1/load', '2', 1, 2), version);
      socket.send(publish('harbor/v1/crane-1/load', '3', 0), version);
      await settled();
      expect(queue.stats().readings).toBe(1);
      if (version === 5) {
        expect(socket.received.at(-1)).toMatchObject({ cmd: 'disconnect', reasonCode: 0x87 });
        expect(socket.ended).toBe(true);
      } else {
        expect(socket.received.filter((p) => p.cmd === 'disconnect')).toEqual([]);
        expect(socket.destroyed).toBe(true);
      }
    }
  });

  it('ends a session told that its key was revoked, MQTT 5 with DISCONNECT 0x87', async () => {
    const { deps, setKeys } = gateway((hash) => [{ name: 'crane', hash }]);
    const { socket, session } = await connected(deps, 5);
    setKeys(() => []);
    session.keysChanged();
    expect(socket.received.at(-1)).toMatchObject({ cmd: 'disconnect', reasonCode: 0x87 });
  });

  it('ends a session whose key no longer allows the ships it sent or the site it wrote as, and keeps one it still allows', async () => {
    const { deps, queue, setKeys } = gateway((hash) => [{ name: 'crane', hash, shipPrefix: 'crane-' }]);
    const { socket, session } = await connected(deps, 5);
    socket.send(publish('harbor/v1/crane-north-1/load', '1', 1), version5);
    socket.send(publish('harbor/v1/crane-north-2/load', '2', 1, 2), version5);
    await settled();
    expect(queue.stats().readings).toBe(2);
    // Narrowed, still a prefix of every ship it sent: the session goes on.
    setKeys((hash) => [{ name: 'crane', hash, shipPrefix: 'crane-north-' }]);
    session.keysChanged();
    socket.send(publish('harbor/v1/crane-north-3/load', '3', 1, 3), version5);
    await settled();
    expect(queue.stats().readings).toBe(3);
    expect(socket.received.filter((p) => p.cmd === 'disconnect')).toEqual([]);
    // Narrowed past a ship it sent.
    setKeys((hash) => [{ name: 'crane', hash, shipPrefix: 'crane-north-1' }]);
    session.keysChanged();
    expect(socket.received.at(-1)).toMatchObject({ cmd: 'disconnect', reasonCode: 0x87 });

    const bound = gateway((hash) => [{ name: 'crane', hash, site: 'Pier 4' }]);
    const other = await connected(bound.deps, 4);
    other.socket.send(publish('harbor/v1/tug-1/load', '1', 1), 4);
    await settled();
    bound.setKeys((hash) => [{ name: 'crane', hash, site: 'Pier 5' }]);
    other.socket.send(publish('harbor/v1/tug-1/load', '2', 1, 2), 4);
    await settled();
    expect(bound.queue.stats().readings).toBe(1);
    expect(other.socket.destroyed).toBe(true);
  });

  it('refuses a PUBLISH whose topic name holds a wildcard, storing nothing', async () => {
    const { deps, queue } = gateway((hash) => [{ name: 'crane', hash }]);
    const v5 = await connected(deps, 5);
    v5.socket.send(publish('harbor/v1/+/temp', '1', 1), 5);
    v5.socket.send(publish('harbor/v1/crane-1/#', '1', 1, 2), 5);
    await settled();
    expect(v5.socket.received.slice(1)).toMatchObject([
      { cmd: 'puback', messageId: 1, reasonCode: 0x90 },
      { cmd: 'puback', messageId: 2, reasonCode: 0x90 },
    ]);
    v5.socket.send(publish('harbor/v1/+/temp', '1', 0), 5);
    await settled();
    expect(v5.socket.received.at(-1)).toMatchObject({ cmd: 'disconnect', reasonCode: 0x90 });
    const v4 = await connected(deps, 4);
    v4.socket.send(publish('harbor/v1/+/temp', '1', 1), 4);
    await settled();
    expect(v4.socket.received.slice(1)).toEqual([]);
    expect(v4.socket.destroyed).toBe(true);
    expect(queue.stats().readings).toBe(0);
  });
});

const version5 = 5;
