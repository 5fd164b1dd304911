import { readFileSync } from 'node:fs';
import type { DeadLetterInput, QueueRecord } from '../../queue/queue-reader.js';
import type { Delivery, SinkTarget } from '../sink.js';
import { describeKafka } from './describe-kafka.js';
import { classifyFailure, type KafkaFailure } from './kafka-failure.js';
import type { KafkaSinkConfig } from '../../config/config.js';
import { readingLetter, reasonText } from '../dead-letter-reason.js';
import { BrokerClock } from './broker-clock.js';
import type { BatchProducer } from './batch-producer.js';
import { ReadingMessages } from './reading-messages.js';

type KafkaClient = typeof import('./batch-producer.js');

/**
 * Most message bytes in one produce request. Kafka refuses a partition's batch over the topic's
 * `max.message.bytes` (1 MiB by default); staying well under it keeps a large batch from being
 * refused whole, and a smaller limit is found by halving. It also bounds the duplicates a broker
 * failure leaves: the failed request's readings the broker wrote without acknowledging. Written
 * straight from the queue records, larger requests would cost less CPU per reading
 * (docs/history/benchmarks.md measured 64 and 256 KiB) but raise that bound.
 */
const MAX_REQUEST_BYTES = 64 * 1024;
// After a timed-out send is abandoned, how long its client may take to give up its retries.
const ABANDON_WAIT_MS = 5_000;

class SendFailed extends Error {
  constructor(readonly failure: KafkaFailure) {
    super(failure.message);
  }
}

/**
 * Delivers readings to a Kafka topic, one message per reading keyed by ship_id (so each ship's
 * series stays in order in its partition), with an idempotent producer and acks from all in-sync
 * replicas. The producer's own retries of a send carry the same sequence numbers, so the broker
 * writes them once. A batch goes in requests of at most MAX_REQUEST_BYTES; when one fails, the
 * sink loop sends the batch again and the requests acknowledged before it are skipped, so only
 * the failed request's readings the broker had written arrive twice (at least once, never lost).
 *
 * A message's value is the reading with its site; its Kafka timestamp is when it was sent, on the
 * broker's clock: the reading's own time is in the value, and a broker refuses timestamps far
 * ahead of its clock (an hour, by default), as a site's clock can be (boards without a real-time
 * clock). A refusal for the timestamps is no reading's fault: its answer tells the broker's time,
 * the request goes again stamped on it, and the offset stands in /status until the clock is right.
 */
export class KafkaTarget implements SinkTarget {
  readonly name = 'kafka';
  readonly describe: string;
  readonly #config: KafkaSinkConfig;
  readonly #site: string;
  readonly #instance: string | undefined;
  readonly #clock: BrokerClock;
  /** The batch being delivered, reused from batch to batch (a send abandoned still holding it gets it to keep). */
  #messages = new ReadingMessages();
  #producer: BatchProducer | undefined;
  #client: Promise<KafkaClient> | undefined;
  /** How far the last, failed batch got: its first record, the readings settled in order, the refused ones among them. */
  #settled: { segment: number; id: number; readings: number; refused: DeadLetterInput[] } | undefined;

  /** `now`: the site's wall clock (epoch ms); tests set it hours off. `instance`: this gateway's, in the value of its own readings. */
  constructor(config: KafkaSinkConfig, options: { site: string; instance?: string; now?: () => number }) {
    this.#config = config;
    this.#site = options.site;
    this.#instance = options.instance;
    this.#clock = new BrokerClock(options.now ?? Date.now);
    this.describe = describeKafka(config);
  }

  /** How far the site's clock is ahead of the broker's (negative: behind), once a refusal told; else undefined. */
  clockAheadMs(): number | undefined {
    return this.#clock.aheadMs();
  }

  async deliver(records: readonly QueueRecord[]): Promise<Delivery> {
    await this.#loadClient();
    const deadLetters: DeadLetterInput[] = [];
    const messages = this.#messages;
    messages.load(records, deadLetters, this.#site, this.#instance);
    // The sink loop sends a failed batch again from the same first record: what the broker
    // acknowledged of it then (or refused for good) is not sent twice.
    const first = records[0];
    const resumed =
      this.#settled !== undefined && first !== undefined && this.#settled.segment === first.segment && this.#settled.id === first.id
        ? this.#settled
        : undefined;
    this.#settled = undefined;
    let settled = Math.min(resumed?.readings ?? 0, messages.length);
    const refused: DeadLetterInput[] = [...(resumed?.refused ?? [])];
    let requests = 0;
    const sendAll = async (from: number, to: number): Promise<void> => {
      try {
        requests += 1;
        await this.#sendOnBrokerTime(messages, from, to);
        settled = to;
      } catch (error) {
        if (!(error instanceof SendFailed) || error.failure.kind !== 'content') throw error;
        if (to - from === 1) {
          const reason = reasonText(`Kafka refused the reading: ${error.failure.message}`);
          refused.push(readingLetter(messages.record(from), messages.reading(from), reason));
          settled = to;
          return;
        }
        // Which message the broker refused is not told per message: halve until it is found.
        const half = from + ((to - from) >> 1);
        await sendAll(from, half);
        await sendAll(half, to);
      }
    };
    try {
      for (let from = settled; from < messages.length; ) {
        const to = requestEnd(messages, from);
        await sendAll(from, to);
        from = to;
      }
    } catch (error) {
      if (first !== undefined) this.#settled = { segment: first.segment, id: first.id, readings: settled, refused };
      const failure = error instanceof SendFailed ? error.failure : classifyFailure(error);
      const message =
        failure.kind === 'clock'
          ? `Kafka refused the message times, readings stay queued: ${failure.message}`
          : `Kafka: ${failure.message}`;
      return { ok: false, message, level: failure.kind === 'operator' ? 'error' : 'warn' };
    } finally {
      if (this.#messages === messages) messages.release();
    }
    return { ok: true, requests, deadLetters: [...deadLetters, ...refused] };
  }

  async close(): Promise<void> {
    const producer = this.#producer;
    this.#producer = undefined;
    await producer?.close();
  }

  /**
   * One request stamped with the broker's time as the site knows it; when the broker refuses the
   * timestamps and tells its clock, once more on that clock (the refused request wrote nothing).
   */
  async #sendOnBrokerTime(messages: ReadingMessages, from: number, to: number): Promise<void> {
    try {
      await this.#send(messages, from, to);
    } catch (error) {
      if (!(error instanceof SendFailed) || error.failure.kind !== 'clock' || error.failure.brokerNowMs === undefined) throw error;
      if (!this.#clock.learn(error.failure.brokerNowMs)) throw error;
      await this.#send(messages, from, to);
    }
  }

  /** One produce call, bounded by the sink's timeout; any failure retires the producer. */
  async #send(messages: ReadingMessages, from: number, to: number): Promise<void> {
    const producer = await this.#openProducer();
    const sent = producer.send(this.#config.topic, messages, from, to, this.#clock.brokerNow());
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#config.timeoutMs);
    });
    try {
      if ((await Promise.race([sent, timedOut])) !== 'timeout') return;
    } catch (error) {
      this.#retire(producer);
      throw new SendFailed(classifyFailure(error));
    } finally {
      clearTimeout(timer);
    }
    // Still retrying (the broker is away): closing the client ends its retries, and the errors
    // they collected say why. Until it has, it may encode the messages again: they stay its own.
    this.#retire(producer);
    if (this.#messages === messages) this.#messages = new ReadingMessages();
    const abandoned = await Promise.race([
      sent.then(
        () => undefined,
        (error: unknown) => error,
      ),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ABANDON_WAIT_MS).unref()),
    ]);
    const why = abandoned === undefined ? undefined : classifyFailure(abandoned);
    throw new SendFailed({
      kind: why?.kind === 'operator' ? 'operator' : 'outage',
      message: `no acknowledgement within ${this.#config.timeoutMs} ms${why === undefined ? '' : `: ${why.message}`}`,
    });
  }

  async #openProducer(): Promise<BatchProducer> {
    if (this.#producer !== undefined) return this.#producer;
    const kafka = await this.#loadClient();
    const { brokers, clientId, tls, tlsCaFile, sasl } = this.#config;
    this.#producer = new kafka.BatchProducer(
      {
        clientId,
        bootstrapBrokers: brokers,
        autocreateTopics: false,
        ...(tls ? { tls: tlsCaFile === undefined ? {} : { ca: readFileSync(tlsCaFile) }, tlsServerName: true } : {}),
        ...(sasl ? { sasl: { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password } } : {}),
      },
      this.#config.compression,
    );
    return this.#producer;
  }

  /**
   * Loaded on first use: the client compiles its option schemas as it loads, memory and start-up
   * time every gateway would pay, Kafka sink or not, as the bundle is one file.
   */
  #loadClient(): Promise<KafkaClient> {
    this.#client ??= import('./batch-producer.js');
    return this.#client;
  }

  /** A producer whose send failed may hold sequence numbers the broker never saw: start anew. */
  #retire(producer: BatchProducer): void {
    if (this.#producer === producer) this.#producer = undefined;
    producer.close().catch(() => undefined);
  }
}

/** Where the request that starts at reading `from` ends: at most MAX_REQUEST_BYTES of messages, at least one. */
function requestEnd(messages: ReadingMessages, from: number): number {
  let bytes = messages.bytes(from);
  let to = from + 1;
  while (to < messages.length && bytes + messages.bytes(to) <= MAX_REQUEST_BYTES) bytes += messages.bytes(to++);
  return to;
}
