import type { KafkaSinkConfig } from '../../config/config.js';

/** The Kafka sink's destination for logs and /status: brokers, topic and security, no password. */
export function describeKafka(config: KafkaSinkConfig): string {
  const security = [config.tls ? 'TLS' : undefined, config.sasl ? `SASL ${config.sasl.mechanism} as ${config.sasl.username}` : undefined]
    .filter((part) => part !== undefined)
    .join(', ');
  return `Kafka ${config.brokers.join(',')} topic ${config.topic}${security === '' ? '' : ` (${security})`}`;
}
