import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKafka, type KafkaBroker } from '../scripts/lib/kafka.mjs';
import { createTopic, readTopic } from './support/kafka.js';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './support/temp-dir.js';
import type { QueueRecord } from '../src/queue/queue-reader.js';
import { createSelfSignedCertificate } from '../src/tls/self-signed.js';
import { formatTimestampNs } from '../src/reading/format-timestamp.js';
import type { KafkaSinkConfig } from '../src/config/config.js';
import { KafkaTarget } from '../src/sinks/kafka/kafka-target.js';
import { Producer } from '@platformatic/kafka';
import { outgoingReadings } from '../src/sinks/outgoing-readings.js';

const USER = { username: 'site-17', password: 'site-17-kafka-secret' };
// The broker's own certificate, which the sink trusts through KAFKA_TLS_CA_FILE.
const certificate = createSelfSignedCertificate({ commonName: 'kafka-test', altNames: ['127.0.0.1'], validDays: 2 });
const caFile = join(tempDir('kafka-ca'), 'ca.pem');
writeFileSync(caFile, certificate.cert);
// On a cold cache Maven first fetches the broker (up to 90 s measured while another test fetched
// it too on a busy machine), then the broker starts.
const FETCH_AND_START_MS = 240_000;
let broker: KafkaBroker;
const targets: KafkaTarget[] = [];
let topics = 0;

beforeAll(async () => {
  broker = await startKafka({ sasl: USER, tls: certificate });
}, FETCH_AND_START_MS);

afterAll(async () => {
  for (const target of targets) await target.close();
  await broker?.close();
}, 60_000);

const SITE = 'pier 7';
const TWO_HOURS = 2 * 3_600_000;

/** A target for `topic`; `now` is the site's clock, when it should be off. */
function target(topic: string, overrides: Partial<KafkaSinkConfig> = {}, now?: () => number): KafkaTarget {
  const made = new KafkaTarget(
    {
      brokers: [broker.bootstrap],
      topic,
      clientId: 'harbor-gateway-test',
      tls: false,
      tlsCaFile: undefined,
      sasl: undefined,
      timeoutMs: 3_000,
      policy: 'drop_oldest',
      backfill: false,
      order: 'oldest_first',
      maxBytesPerS: 0,
      cheapHours: [],
      batchReadings: 10_000,
      flushIntervalMs: 1000,
      compression: 'gzip',
      ...overrides,
    },
    { site: SITE, ...(now === undefined ? {} : { now }) },
  );
  targets.push(made);
  return made;
}

async function newTopic(partitions = 3, configs: Record<string, string> = {}): Promise<string> {
  topics += 1;
  const topic = `readings-${topics}`;
  await createTopic(broker.bootstrap, topic, partitions, configs);
  return topic;
}

interface Line {
  timeNs: string;
  shipId: string;
  cargoId: string;
  value: number;
}

let nextId = 0;
const record = (lines: Line[]): QueueRecord => {
  const payload = lines.map((l) => `${l.timeNs}\t${l.shipId}\t${l.cargoId}\t${l.value}`).join('\n');
  nextId += 1;
  return { segment: 1, id: nextId, receivedMs: 1_795_780_800_000, readings: lines.length, bytes: payload.length, payload };
};

/** `perShip` readings for each of `ships` ships, one nanosecond apart, spread over records of 7. */
function readings(ships: number, perShip: number, baseNs = 1_795_780_800_000_000_001n): { records: QueueRecord[]; lines: Line[] } {
  const lines: Line[] = [];
  for (let i = 0; i < perShip; i++) {
    for (let s = 0; s < ships; s++)
      lines.push({ timeNs: String(baseNs + BigInt(i)), shipId: `ship-${s}`, cargoId: 'temperature', value: i + s / 10 });
  }
  const records: QueueRecord[] = [];
  for (let i = 0; i < lines.length; i += 7) records.push(record(lines.slice(i, i + 7)));
  return { records, lines };
}

/** The attributes' codec bits (0 none, 1 gzip, 2 snappy, 3 lz4) of each record batch the broker stored for `topic`, and their bytes. */
function storedBatches(topic: string, partitions: number): { codecs: number[]; bytes: number } {
  const codecs: number[] = [];
  let bytes = 0;
  for (let p = 0; p < partitions; p++) {
    const dir = join(broker.dataDir, 'log', `${topic}-${p}`);
    for (const name of readdirSync(dir).filter((n) => n.endsWith('.log'))) {
      const log = readFileSync(join(dir, name));
      // Each batch: base offset (8), length of the rest (4), leader epoch (4), magic (1), CRC (4), attributes (2);
      // a segment may be longer than its batches, zeros after them.
      for (let at = 0; at + 12 <= log.length && log.readInt32BE(at + 8) > 0; at += 12 + log.readInt32BE(at + 8)) {
        codecs.push(log.readInt16BE(at + 21) & 7);
        bytes += 12 + log.readInt32BE(at + 8);
      }
    }
  }
  return { codecs, bytes };
}

describe('Kafka target against a real broker', () => {
  it('sends record batches compressed with KAFKA_COMPRESSION, which the broker stores as sent and a consumer reads back whole', async () => {
    const { records, lines } = readings(5, 400);
    const stored: Record<string, { codecs: number[]; bytes: number }> = {};
    for (const [compression, bitmask] of [
      ['off', 0],
      ['gzip', 1],
      ['snappy', 2],
      ['lz4', 3],
    ] as const) {
      const topic = await newTopic(1);
      // The topic's readiness marker, written when it was made.
      const marker = storedBatches(topic, 1);
      expect(await target(topic, { compression }).deliver(records)).toMatchObject({ ok: true, deadLetters: [] });
      const messages = await readTopic(broker.bootstrap, topic);
      expect(
        messages.map((m) => [m.key, JSON.parse(m.value).value]),
        compression,
      ).toEqual(lines.map((l) => [l.shipId, l.value]));
      const all = storedBatches(topic, 1);
      stored[compression] = { codecs: all.codecs.slice(marker.codecs.length), bytes: all.bytes - marker.bytes };
      expect(new Set(stored[compression].codecs), compression).toEqual(new Set([bitmask]));
    }
    expect(stored['gzip']!.bytes * 4).toBeLessThan(stored['off']!.bytes);
    expect(stored['snappy']!.bytes * 2).toBeLessThan(stored['off']!.bytes);
    expect(stored['lz4']!.bytes * 2).toBeLessThan(stored['off']!.bytes);
  });

  it('delivers every reading keyed by ship_id, each ship in order, with exact nanosecond times', async () => {
    const topic = await newTopic();
    const { records, lines } = readings(5, 200);
    const delivery = await target(topic).deliver(records);
    expect(delivery).toMatchObject({ ok: true, deadLetters: [] });
    // Several requests of one idempotent producer: the broker took each one's sequence numbers as the next.
    expect(delivery.ok && delivery.requests).toBeGreaterThan(1);

    const messages = await readTopic(broker.bootstrap, topic);
    expect(messages).toHaveLength(lines.length);
    for (let s = 0; s < 5; s++) {
      const ship = `ship-${s}`;
      const mine = messages.filter((m) => m.key === ship);
      expect(new Set(mine.map((m) => m.partition)).size).toBe(1);
      const expected = lines.filter((l) => l.shipId === ship);
      expect(mine.map((m) => JSON.parse(m.value))).toEqual(
        expected.map((l) => ({ time: formatTimestampNs(l.timeNs), ship_id: ship, cargo_id: 'temperature', value: l.value, site: SITE })),
      );
    }
    expect(JSON.parse(messages[0]!.value).time).toMatch(/^2026-11-27T12:00:00\.0000000\d\dZ$/);
  });

  it("writes the very messages the client library's producer writes for the same readings: partition, offset, key, value, headers, time", async () => {
    const viaSink = await newTopic();
    const viaClient = await newTopic();
    const sentAt = Date.now();
    const { records } = readings(5, 60);
    records.push(record([{ timeNs: '1795780800000000007', shipId: 'MV Ærøskøbing ⚓', cargoId: 'température', value: -0.5 }]), {
      ...record([{ timeNs: '1795780800000000008', shipId: 'ship-1', cargoId: 'humidity', value: 1e21 }]),
      site: 'quai 9 « nord »',
    });
    expect(await target(viaSink, {}, () => sentAt).deliver(records)).toMatchObject({ ok: true, deadLetters: [] });

    // What the sink sent before it encoded its own batches: the client's idempotent producer, its
    // default partitioner, the same key, JSON value and time.
    const producer = new Producer({ clientId: 'harbor-gateway-test', bootstrapBrokers: [broker.bootstrap], idempotent: true, acks: -1 });
    try {
      const messages = outgoingReadings(records, [], SITE).map(({ reading, json }) => ({
        topic: viaClient,
        key: Buffer.from(reading.shipId),
        value: Buffer.from(json),
        timestamp: BigInt(sentAt),
      }));
      await producer.send({ messages });
    } finally {
      await producer.close();
    }

    const sunk = await readTopic(broker.bootstrap, viaSink);
    expect(sunk).toHaveLength(records.reduce((n, r) => n + r.readings, 0));
    expect(sunk).toEqual(await readTopic(broker.bootstrap, viaClient));
    expect(sunk.find((m) => m.key === 'MV Ærøskøbing ⚓')).toMatchObject({ timestamp: BigInt(sentAt), headers: [] });
  });

  it('delivers every reading from a site whose clock is 2 h ahead, stamped on the broker clock, and tells the offset', async () => {
    const topic = await newTopic();
    const sink = target(topic, {}, () => Date.now() + TWO_HOURS);
    const { records, lines } = readings(3, 20);
    expect(await sink.deliver(records)).toMatchObject({ ok: true, deadLetters: [] });
    expect(sink.clockAheadMs()).toBeGreaterThan(TWO_HOURS - 60_000);
    expect(sink.clockAheadMs()).toBeLessThan(TWO_HOURS + 60_000);
    const messages = await readTopic(broker.bootstrap, topic);
    expect(messages).toHaveLength(lines.length);
    for (const m of messages) expect(Math.abs(Number(m.timestamp) - Date.now())).toBeLessThan(5 * 60_000);
    // Later batches go on the broker's clock at once.
    expect(await sink.deliver(readings(1, 5, 1_795_780_900_000_000_000n).records)).toMatchObject({ ok: true, requests: 1 });
  });

  it("delivers every reading from a site whose clock is 2 h behind: on a topic that takes any past time as it is, on one that refuses it on the broker's clock", async () => {
    const behind = () => Date.now() - TWO_HOURS;
    const lenient = await newTopic();
    const first = target(lenient, {}, behind);
    expect(await first.deliver(readings(2, 10).records)).toMatchObject({ ok: true, deadLetters: [] });
    expect(first.clockAheadMs()).toBeUndefined();
    expect(await readTopic(broker.bootstrap, lenient)).toHaveLength(20);

    const strict = await newTopic(3, { 'message.timestamp.before.max.ms': '3600000' });
    const second = target(strict, {}, behind);
    expect(await second.deliver(readings(2, 10).records)).toMatchObject({ ok: true, deadLetters: [] });
    expect(second.clockAheadMs()).toBeLessThan(-TWO_HOURS + 60_000);
    const messages = await readTopic(broker.bootstrap, strict);
    expect(messages).toHaveLength(20);
    for (const m of messages) expect(Math.abs(Number(m.timestamp) - Date.now())).toBeLessThan(5 * 60_000);
  });

  it('keeps the readings queued, none dead-lettered, when the broker refuses the times and tells no clock to go by', async () => {
    // A topic that takes only times within a second of its clock, whose refusal the site reads as
    // Kafka's default range (up to an hour ahead): its guess of the broker's clock is refused again.
    const topic = await newTopic(1, { 'message.timestamp.before.max.ms': '1000', 'message.timestamp.after.max.ms': '1000' });
    const sink = target(topic, {}, () => Date.now() + TWO_HOURS);
    const delivery = await sink.deliver(readings(1, 3).records);
    expect(delivery).toMatchObject({
      ok: false,
      level: 'warn',
      message: expect.stringMatching(/^Kafka refused the message times, readings stay queued: INVALID_TIMESTAMP/),
    });
  });

  it('fails the batch while the broker is down and delivers it once the broker is back', async () => {
    const topic = await newTopic();
    const sink = target(topic);
    const first = readings(2, 10);
    expect(await sink.deliver(first.records)).toMatchObject({ ok: true });

    await broker.stop();
    const second = readings(2, 10, 1_795_780_900_000_000_000n);
    const failed = await sink.deliver(second.records);
    expect(failed).toMatchObject({ ok: false, level: 'warn' });
    // Refused connections, a connection the broker closed mid-answer, or no answer in time: an outage each.
    expect(failed.ok === false && failed.message).toMatch(/^Kafka: /);

    await broker.start();
    let delivery = await sink.deliver(second.records);
    // The broker may still be electing its partitions' leaders a moment after it started.
    for (let attempt = 0; !delivery.ok && attempt < 10; attempt++) delivery = await sink.deliver(second.records);
    expect(delivery).toMatchObject({ ok: true, deadLetters: [] });

    const values = (await readTopic(broker.bootstrap, topic)).map((m) => m.value);
    expect(values).toHaveLength(first.lines.length + second.lines.length);
  }, 120_000);

  it('sets aside a reading the broker refuses as too large and delivers the rest', async () => {
    const topic = await newTopic(1, { 'max.message.bytes': '2000' });
    const small = readings(3, 20);
    // Random characters: too large for the topic compressed too.
    const huge: Line = {
      timeNs: '1795780800000000000',
      shipId: `ship-${randomBytes(3000).toString('base64url')}`,
      cargoId: 'temperature',
      value: 1,
    };
    const delivery = await target(topic).deliver([...small.records, record([huge])]);
    expect(delivery.ok).toBe(true);
    if (!delivery.ok) return;
    expect(delivery.deadLetters).toHaveLength(1);
    expect(delivery.deadLetters[0]!.reason).toMatch(/^Kafka refused the reading: MESSAGE_TOO_LARGE/);
    expect(delivery.deadLetters[0]!.line).toBe(`${huge.timeNs}\t${huge.shipId}\ttemperature\t1`);
    const values = new Set((await readTopic(broker.bootstrap, topic)).map((m) => JSON.parse(m.value).value));
    expect([...values].sort((a, b) => a - b)).toEqual(small.lines.map((l) => l.value).sort((a, b) => a - b));
  });

  it('keeps a corrupt queue record as one dead letter and delivers the others', async () => {
    const topic = await newTopic();
    const good = readings(1, 3);
    const corrupt: QueueRecord = { segment: 1, id: 999, receivedMs: 1, readings: 1, bytes: 9, payload: 'not\ta line' };
    const delivery = await target(topic).deliver([...good.records, corrupt]);
    expect(delivery).toMatchObject({ ok: true, deadLetters: [{ receivedMs: 1, line: 'not\ta line' }] });
    expect(delivery.ok && delivery.deadLetters[0]!.reason).toMatch(/^corrupt queue record/);
    expect(await readTopic(broker.bootstrap, topic)).toHaveLength(3);
  });

  it('asks an operator to act on a missing topic', async () => {
    const delivery = await target('no-such-topic').deliver(readings(1, 1).records);
    expect(delivery).toMatchObject({ ok: false, level: 'error' });
    expect(delivery.ok === false && delivery.message).toMatch(/UNKNOWN_TOPIC_OR_PARTITION/);
  });

  it('authenticates with SASL SCRAM and PLAIN, and asks an operator to act on a wrong password', async () => {
    const topic = await newTopic();
    const sasl = (mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512', password = USER.password) =>
      target(topic, { brokers: [broker.saslBootstrap!], sasl: { mechanism, username: USER.username, password } });
    for (const mechanism of ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const) {
      expect(await sasl(mechanism).deliver(readings(1, 1).records)).toMatchObject({ ok: true });
    }
    const refused = sasl('SCRAM-SHA-256', 'wrong-password');
    expect(refused.describe).toBe(`Kafka ${broker.saslBootstrap} topic ${topic} (SASL SCRAM-SHA-256 as site-17)`);
    const delivery = await refused.deliver(readings(1, 1).records);
    expect(delivery).toMatchObject({ ok: false, level: 'error' });
    expect(delivery.ok === false && delivery.message).not.toContain('wrong-password');
  });

  it('speaks TLS to a broker whose CA it is given, and asks an operator to act on one it cannot verify', async () => {
    const topic = await newTopic();
    const trusting = target(topic, { brokers: [broker.tlsBootstrap!], tls: true, tlsCaFile: caFile });
    expect(await trusting.deliver(readings(1, 2).records)).toMatchObject({ ok: true, deadLetters: [] });
    const untrusting = await target(topic, { brokers: [broker.tlsBootstrap!], tls: true }).deliver(readings(1, 1).records);
    expect(untrusting).toMatchObject({ ok: false, level: 'error' });
    expect(untrusting.ok === false && untrusting.message).toMatch(/SELF_SIGNED|CERT/);
    expect(await readTopic(broker.bootstrap, topic)).toHaveLength(2);
  });
});
