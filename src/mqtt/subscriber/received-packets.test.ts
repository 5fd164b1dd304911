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

describe('the QoS 2 messages the subscriber took', () => {
  it('knows a copy (DUP, same id, topic and payload) after a restart of the gateway, and nothing else', async () => {
    const dataDir = tempDir('received');
    let queue = queueAt(dataDir);
    let received = ReceivedPackets.open(queue, 'mqtt://broker:1883 site');
    const first = message(7, '{"Power":1}');
    expect(received.isCopy(first)).toBe(false);
    await queue.append('1\tplug\tPower\t1', 1, 1000, undefined, undefined, received.mark(first));
    received.taken(first, true);
    queue.close();

    queue = queueAt(dataDir);
    received = ReceivedPackets.open(queue, 'mqtt://broker:1883 site');
    expect(received.isCopy(message(7, '{"Power":1}', true))).toBe(true);
    // Another message under that id, or one not sent before, is not a copy.
    expect(received.isCopy(message(7, '{"Power":2}', true))).toBe(false);
    expect(received.isCopy(message(8, '{"Power":1}', true))).toBe(false);
    // Another session's ids are its own.
    expect(ReceivedPackets.open(queue, 'mqtt://broker:1883 other').size).toBe(0);
  });

  it('keeps a released id for a copy until the first PUBLISH without DUP, as a restarted broker may send the PUBLISH again', async () => {
    const dataDir = tempDir('received');
    const queue = queueAt(dataDir);
    const received = ReceivedPackets.open(queue, 'session');
    const first = message(7, 'a');
    await queue.append('1\tplug\tPower\t1', 1, 1000, undefined, undefined, received.mark(first));
    received.taken(first, true);
    await received.release(7);
    expect(ReceivedPackets.open(queue, 'session').isCopy(message(7, 'a', true))).toBe(true);
    expect(received.isCopy(message(7, 'a', true))).toBe(true);
    expect(received.isCopy(message(9, 'b'))).toBe(false);
    expect(received.isCopy(message(7, 'a', true))).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(ReceivedPackets.open(queue, 'session').size).toBe(0);
  });

  it('remembers a message that left nothing in memory only, and forgets every id when the broker has no session', async () => {
    const queue = queueAt(tempDir('received'));
    const received = ReceivedPackets.open(queue, 'session');
    received.taken(message(3, 'ON'), false);
    expect(received.isCopy(message(3, 'ON', true))).toBe(true);
    expect(ReceivedPackets.open(queue, 'session').size).toBe(0);
    const stored = message(4, 'x');
    await queue.append('1\tplug\tPower\t1', 1, 1000, undefined, undefined, received.mark(stored));
    received.taken(stored, true);
    await received.forgetAll();
    expect(received.isCopy(message(4, 'x', true))).toBe(false);
    expect(ReceivedPackets.open(queue, 'session').size).toBe(0);
  });
});
