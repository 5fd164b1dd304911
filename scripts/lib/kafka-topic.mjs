// Reads a test topic back to its current end: how the Kafka tests and the fleet run see what the
// sinks delivered.
import { Consumer } from '@platformatic/kafka';
import { TOPIC_READY_KEY } from './kafka.mjs';

/**
 * @typedef {object} ReadMessage
 * @property {string} key
 * @property {string} value
 * @property {number} partition
 * @property {bigint} offset
 * @property {bigint} timestamp
 * @property {[string, string][]} headers
 */

/**
 * Every message of the topic but createKafkaTopic's own, from the start to the end offsets it has
 * now, per partition in offset order. Waits for them (a consumer joins its group first); fails
 * naming what is missing.
 * @param {string} bootstrap
 * @param {string} topic
 * @param {number} [timeoutMs]
 * @returns {Promise<ReadMessage[]>}
 */
export async function readTopic(bootstrap, topic, timeoutMs = 60_000) {
  const consumer = new Consumer({
    clientId: 'harbor-test-consumer',
    groupId: `harbor-test-${topic}-${process.pid}-${Date.now()}`,
    bootstrapBrokers: [bootstrap],
    autocommit: false,
    maxWaitTime: 200,
  });
  try {
    const ends = (await consumer.listOffsets({ topics: [topic] })).get(topic) ?? [];
    const remaining = new Map(ends.map((end, partition) => [partition, end]));
    for (const [partition, end] of remaining) if (end === 0n) remaining.delete(partition);
    /** @type {ReadMessage[]} */
    const messages = [];
    if (remaining.size === 0) return messages;
    const stream = await consumer.consume({ topics: [topic], mode: 'earliest' });
    const timer = setTimeout(
      () =>
        stream.destroy(
          new Error(`reading ${topic} took over ${timeoutMs} ms; partitions not read to their end: ${[...remaining.keys()].join(', ')}`),
        ),
      timeoutMs,
    );
    try {
      for await (const message of stream) {
        const key = message.key.toString();
        if (key !== TOPIC_READY_KEY) {
          messages.push({
            key,
            value: message.value.toString(),
            partition: message.partition,
            offset: message.offset,
            timestamp: message.timestamp,
            headers: [...message.headers].map(([name, value]) => [name.toString(), value.toString()]),
          });
        }
        const end = remaining.get(message.partition);
        if (end !== undefined && message.offset + 1n >= end) remaining.delete(message.partition);
        if (remaining.size === 0) break;
      }
    } finally {
      clearTimeout(timer);
      await stream.close();
    }
    return messages.sort((a, b) => a.partition - b.partition || (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0));
  } finally {
    await consumer.close(true);
  }
}
