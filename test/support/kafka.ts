import { Consumer, type Message } from '@platformatic/kafka';

import { TOPIC_READY_KEY } from '../../scripts/lib/kafka.mjs';

export { createKafkaTopic as createTopic } from '../../scripts/lib/kafka.mjs';

export interface ReadMessage {
  key: string;
  value: string;
  partition: number;
  offset: bigint;
  timestamp: bigint;
}

/**
 * Every message of the topic but createTopic's own, from the start to the end offsets it has now,
 * per partition in offset order. Waits for them (a consumer joins its group first); fails naming what is missing.
 */
export async function readTopic(bootstrap: string, topic: string, timeoutMs = 60_000): Promise<ReadMessage[]> {
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
    const messages: ReadMessage[] = [];
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
      for await (const message of stream as AsyncIterable<Message>) {
        const key = message.key.toString();
        if (key !== TOPIC_READY_KEY) {
          messages.push({
            key,
            value: message.value.toString(),
            partition: message.partition,
            offset: message.offset,
            timestamp: message.timestamp,
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
