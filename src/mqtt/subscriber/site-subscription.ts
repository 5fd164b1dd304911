import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { MqttSubscribeConfig } from '../../config/mqtt-config.js';
import type { QueueWriter } from '../../queue/queue-writer.js';
import { parseBatch, type Validator } from '../../reading/parse-readings.js';
import type { MqttSubscriptionStats } from '../../stats.js';
import type { MqttIngest } from '../mqtt-ingest.js';
import { BrokerClient, type BrokerMessage, type Handled } from './broker-client.js';
import { mapMessage } from './message-mapping.js';
import { ReceivedPackets } from './received-packets.js';

/** The key name a subscription's readings are stored under: it has no device key of its own. */
export const SUBSCRIPTION_KEY = 'mqtt-subscription';
/** The dead letters of refused messages are kept under this `sink`. */
const DEAD_LETTER_SOURCE = 'mqtt-subscribe';

export interface SiteSubscriptionDeps {
  config: MqttSubscribeConfig;
  ingest: MqttIngest;
  /** Where the QoS 2 packet ids taken and not released are kept (received-packets.ts). */
  queue: QueueWriter;
  validator: Validator;
  maxBatchReadings: number;
  maxPacketBytes: number;
  stats: MqttSubscriptionStats;
  logger: Logger;
}

/**
 * The gateway subscribed to a site broker: every message mapped to readings and committed before the
 * broker gets its PUBACK (PUBREC). A message the mapping finds no number in is acknowledged and
 * counted; one whose readings the schema refuses becomes a dead letter (the broker cannot be told
 * otherwise); when the queue cannot take one, nothing more is acknowledged and the broker keeps it
 * for the reconnect. A QoS 2 message's packet id is committed with its readings or dead letter, so a
 * copy the broker sends again is never stored twice (received-packets.ts); a QoS 1 message has no
 * such identity, and one whose PUBACK a crash took is stored again.
 */
export function subscribeToSite(deps: SiteSubscriptionDeps): { stop(deadline: number): Promise<void> } {
  const { config, stats, logger } = deps;
  const principal = { name: SUBSCRIPTION_KEY };
  const session = `${config.url} ${config.clientId}`;
  const received = ReceivedPackets.open(deps.queue, session);
  const handle = async (message: BrokerMessage): Promise<Handled> => {
    const { topic, payload, retained, qos } = message;
    stats.messages += 1;
    if (qos === 1) stats.atLeastOnce += 1;
    /** Acknowledged: a QoS 2 message is taken, with `mark` committed when it left something in the file. */
    const taken = (durable: boolean): Handled => {
      if (qos === 2) received.taken(message, durable);
      return 'ack';
    };
    const mark = qos === 2 ? received.mark(message) : undefined;
    // A retained message is an old value the broker hands every new subscription: not a new reading.
    if (retained) return taken(false);
    const receivedMs = Date.now();
    const mapped = mapMessage(config.mapping, topic, payload);
    const parsed = mapped.ok
      ? parseBatch(mapped.readings, deps.validator, deps.maxBatchReadings)
      : { ...mapped, refusal: 'invalid' as const };
    if (mapped.ok && mapped.readings.length === 0) {
      stats.withoutReadings += 1;
      return taken(false);
    }
    const outcome = parsed.ok
      ? await deps.ingest.store(principal, parsed.readings, () => ['topic'], mark)
      : ({ status: 'refused', kind: parsed.refusal, message: parsed.message, details: parsed.details } as const);
    if (outcome.status === 'stored') {
      stats.readings += outcome.readings;
      return taken(true);
    }
    if (outcome.status === 'empty') return taken(false);
    if (outcome.status === 'unavailable') return 'retry';
    await deps.ingest.deadLetter(DEAD_LETTER_SOURCE, outcome, { key: SUBSCRIPTION_KEY, topic, payload, receivedMs }, mark);
    stats.deadLettered += 1;
    return taken(true);
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
    received,
    onCopy: () => {
      stats.copies += 1;
    },
    onSubscribed: (granted) => {
      stats.grantedQos = [...granted];
      const below = config.mapping.topics.filter((_, i) => (granted[i] ?? 0) < 2);
      const fields = { event: 'mqtt_subscription_granted', broker: config.url, topics: config.mapping.topics, grantedQos: granted };
      if (below.length === 0) logger.info(fields, 'the site broker granted QoS 2: each message is stored once');
      else {
        logger.warn(
          { ...fields, belowQos2: below },
          `the site broker granted less than QoS 2 for ${below.join(', ')}: its messages are stored at least once, and a crash can store one twice`,
        );
      }
    },
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
