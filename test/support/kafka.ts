import { afterAll, beforeAll } from 'vitest';
import { startKafka, type KafkaBroker } from '../../scripts/lib/kafka.mjs';
export { createKafkaTopic as createTopic } from '../../scripts/lib/kafka.mjs';
export { type ReadMessage, readTopic } from '../../scripts/lib/kafka-topic.mjs';

/**
 * A Kafka broker for the tests of one file: started before them and closed after them, once the
 * file's own afterAll hooks (registered later, so run earlier) have stopped what used it.
 */
export function kafkaForTests(): { readonly broker: KafkaBroker } {
  let started: KafkaBroker | undefined;
  beforeAll(async () => {
    started = await startKafka();
  }, 240_000);
  afterAll(async () => {
    await started?.close();
  }, 60_000);
  return {
    get broker(): KafkaBroker {
      if (started === undefined) throw new Error('the Kafka broker for these tests has not started');
      return started;
    },
  };
}
