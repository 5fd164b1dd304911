import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../../../test/support/temp-dir.js';
import { QueueWriter } from '../../queue/queue-writer.js';
import type { BrokerMessage } from './broker-client.js';
import { ReceivedPackets } from './received-packets.js';

const open: QueueWriter[] = [];
const queueAt = (dataDir: string) => {
  const queue = QueueWriter.open({ dataDir, durability: 'process-crash', maxBytes: 1024 * 1024 });
  open.push(queue);
  return queue;
};
afterEach(() => {
  for (const queue of open.splice(0)) queue.close();
});

const message = (packetId: number, payload: string, dup = false): BrokerMessage => ({
  topic: 'tele/plug/SENSOR',
  payload: Buffer.from(payload),
  retained: false,
  qos: 2,
  packetId,
  dup,
});

/** Takes a message as the subscription does when it leaves readings: marked in the transaction of its append. */
const store = async (queue: QueueWriter, received: ReceivedPackets, m: BrokerMessage): Promise<void> => {
  await queue.append('1\tplug\tPower\t1', 1, 1000, undefined, undefined, received.mark(m));
  received.taken(m, true);
};

describe('the QoS 2 messages the subscriber took', () => {
  it('knows a copy (DUP, same id, topic and payload) after a restart of the gateway, and nothing else', async () => {
    const dataDir = tempDir('received');
    let queue = queueAt(dataDir);
    let received = ReceivedPackets.open(queue, 'mqtt://broker:1883 site');
    const first = message(7, '{"Power":1}');
    expect(received.isCopy(first)).toBe(false);
    await store(queue, received, first);
    queue.close();

    queue = queueAt(dataDir);
    received = ReceivedPackets.open(queue, 'mqtt://broker:1883 site');
    expect(received.isCopy(message(7, '{"Power":1}', true))).toBe(true);
    // Not without DUP (the broker's first try of a new message), not another message under that
    // id, not a message under another id, not in another session.
    expect(received.isCopy(message(7, '{"Power":1}'))).toBe(false);
    expect(received.isCopy(message(7, '{"Power":2}', true))).toBe(false);
    expect(received.isCopy(message(8, '{"Power":1}', true))).toBe(false);
    expect(ReceivedPackets.open(queue, 'mqtt://broker:1883 other').isCopy(message(7, '{"Power":1}', true))).toBe(false);
  });

  it('keeps an id past its PUBREL until the broker hands it out for a new message, as a restarted Mosquitto sends the PUBLISH again', async () => {
    const queue = queueAt(tempDir('received'));
    const received = ReceivedPackets.open(queue, 'session');
    await store(queue, received, message(7, 'a'));
    await received.release(7);
    for (let i = 0; i < 3000; i++) await store(queue, received, message(100 + i, `m${i}`));
    expect(received.isCopy(message(7, 'a', true))).toBe(true);
    // Handed out again: the new message is the id's.
    expect(received.isCopy(message(7, 'c'))).toBe(false);
    await store(queue, received, message(7, 'c'));
    expect(received.isCopy(message(7, 'a', true))).toBe(false);
    expect(received.isCopy(message(7, 'c', true))).toBe(true);
    const file = new Database(queue.path, { readonly: true });
    expect(file.prepare('SELECT COUNT(*) FROM mqtt_received').pluck().get()).toBe(3001);
    file.close();
  });

  it('remembers a message that left nothing in memory until its PUBREL, and forgets every id when the broker has no session', async () => {
    const queue = queueAt(tempDir('received'));
    const received = ReceivedPackets.open(queue, 'session');
    received.taken(message(3, 'ON'), false);
    expect(received.isCopy(message(3, 'ON', true))).toBe(true);
    expect(ReceivedPackets.open(queue, 'session').isCopy(message(3, 'ON', true))).toBe(false);
    await received.release(3);
    expect(received.isCopy(message(3, 'ON', true))).toBe(false);
    await store(queue, received, message(4, 'x'));
    await received.forgetAll();
    expect(received.isCopy(message(4, 'x', true))).toBe(false);
  });
});
