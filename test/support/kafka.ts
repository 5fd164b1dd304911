export { createKafkaTopic as createTopic } from '../../scripts/lib/kafka.mjs';
export { type ReadMessage, readTopic } from '../../scripts/lib/kafka-topic.mjs';
