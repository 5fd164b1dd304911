import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { MqttSubscribeConfig } from '../../config/mqtt-config.js';
import { parseBatch, type Validator } from '../../reading/parse-readings.js';
import type { MqttSubscriptionStats } from '../../stats.js';
import type { MqttIngest } from '../mqtt-ingest.js';
import { BrokerClient, type Handled } from './broker-client.js';
import { mapMessage } from './message-mapping.js';

/** The key name a subscription's readings are stored under: it has no device key of its own. */
export const SUBSCRIPTION_KEY = 'mqtt-subscription';
/** The dead letters of refused messages are kept under this `sink`. */
const DEAD_LETTER_SOURCE = 'mqtt-subscribe';

export interface SiteSubscriptionDeps {
  config: MqttSubscribeConfig;
  ingest: MqttIngest;
  validator: Validator;
  maxBatchReadings: number;
  maxPacketBytes: number;
  stats: MqttSubscriptionStats;
  logger: Logger;
}

/**
 * The gateway subscribed to a site broker: every message mapped to readings and committed before the
 * broker gets its PUBACK. A message the mapping finds no number in is acknowledged and counted; one
 * whose readings the schema refuses becomes a dead letter (the broker cannot be told otherwise); when
 * the queue cannot take one, nothing more is acknowledged and the broker keeps it for the reconnect.
 */
export function subscribeToSite(deps: SiteSubscriptionDeps): { stop(deadline: number): Promise<void> } {
  const { config, stats, logger } = deps;
  const principal = { name: SUBSCRIPTION_KEY };
  const handle = async (topic: string, payload: Buffer, retained: boolean): Promise<Handled> => {
    stats.messages += 1;
    // A retained message is an old value the broker hands every new subscription: not a new reading.
    if (retained) return 'ack';
    const receivedMs = Date.now();
    const mapped = mapMessage(config.mapping, topic, payload);
    const parsed = mapped.ok
      ? parseBatch(mapped.readings, deps.validator, deps.maxBatchReadings)
      : { ...mapped, refusal: 'invalid' as const };
    if (mapped.ok && mapped.readings.length === 0) {
      stats.withoutReadings += 1;
      return 'ack';
    }
    const outcome = parsed.ok
      ? await deps.ingest.store(principal, parsed.readings, () => ['topic'])
      : ({ status: 'refused', kind: parsed.refusal, message: parsed.message, details: parsed.details } as const);
    if (outcome.status === 'stored') {
      stats.readings += outcome.readings;
      return 'ack';
    }
    if (outcome.status === 'empty') return 'ack';
    if (outcome.status === 'unavailable') return 'retry';
    await deps.ingest.deadLetter(DEAD_LETTER_SOURCE, outcome, { key: SUBSCRIPTION_KEY, topic, payload, receivedMs });
    stats.deadLettered += 1;
    return 'ack';
  };
  const client = new BrokerClient({
    url: new URL(config.url),
    clientId: config.clientId,
    username: config.username,
    password: config.password,
    ca: config.caFile === undefined ? undefined : readFileSync(config.caFile, 'utf8'),
    topics: config.mapping.topics,
    keepAliveS: 30,
    maxPacketBytes: deps.maxPacketBytes,
    onMessage: handle,
    onState: ({ connected, error }) => {
      if (connected) {
        stats.connects += 1;
        logger.info(
          { event: 'mqtt_subscribed', broker: config.url, topics: config.mapping.topics, clientId: config.clientId },
          'subscribed to the site broker',
        );
      } else if (error !== undefined) {
        stats.lastError = { at: new Date().toISOString(), message: error };
        logger.warn({ event: 'mqtt_subscription_failed', broker: config.url, error }, `site broker: ${error}`);
      }
      stats.connected = connected;
    },
  });
  client.start();
  return { stop: (deadline) => client.stop(deadline) };
}
