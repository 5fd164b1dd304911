import {
  Base,
  type BaseOptions,
  type ClusterMetadata,
  compressionsAlgorithms,
  DynamicBuffer,
  kGetApi,
  kGetBootstrapConnection,
  kGetConnection,
  kMetadata,
  kOptions,
  kPerformWithRetry,
  produceV7,
  produceV8,
  produceV9,
  produceV10,
  produceV11,
  type ResponseParser,
  Writer,
} from '@platformatic/kafka';
import {
  type BatchCodec,
  encodeProduceRequest,
  type MessageList,
  nextSequence,
  type PartitionMessages,
  ScratchBuffer,
} from './produce-request.js';

/** `KAFKA_COMPRESSION`: the codec of each record batch, or `off`. */
export type KafkaCompression = 'gzip' | 'snappy' | 'lz4' | 'off';

/** Messages with their keys' partition hashes (murmur2 of the key, unsigned). */
export interface KeyedMessages extends MessageList {
  hash(i: number): number;
}

// Acknowledged by every in-sync replica: what an idempotent producer requires.
const ACKS_ALL = -1;
const PRODUCE_API = 0;
const RESPONSE_PARSERS: Readonly<Record<number, ResponseParser<unknown>>> = {
  7: produceV7.parseResponse,
  8: produceV8.parseResponse,
  9: produceV9.parseResponse,
  10: produceV10.parseResponse,
  11: produceV11.parseResponse,
};

interface ProducerIdentity {
  producerId: bigint;
  producerEpoch: number;
}
/** InitProducerId's request: transactional id, transaction timeout, the producer id and epoch held before. */
type InitProducerIdRequest = [string | null, number, bigint, number];

const hasStaleMetadata = (error: unknown): boolean =>
  (error as { findBy?: (property: string, value: unknown) => unknown }).findBy?.('hasStaleMetadata', true) != null;

/**
 * An idempotent producer whose record batches are encoded here, one buffer a request
 * (`produce-request.ts`), rather than by the client library's `Producer`, which builds each
 * message of its own batch from several small buffers (the Kafka sink's CPU went mostly to them and
 * to collecting them). Built on the library's `Base` client, which its own Producer extends: its
 * connections (TLS, SASL), cluster metadata, API version choice and retries are the library's.
 * What its Producer adds is done alike: a producer id from InitProducerId, acks from all in-sync
 * replicas, one request in flight per broker, retries until closed carrying the same sequence
 * numbers (the broker writes a resent batch once), a request sent again once to a partition's new
 * leader when the metadata was stale, and the sequences counted on only once a send was
 * acknowledged whole.
 */
export class BatchProducer extends Base {
  #identity: Promise<ProducerIdentity> | undefined;
  /** The next sequence number of each `topic:partition` this producer sent to. */
  readonly #sequences = new Map<string, number>();
  readonly #scratch = new ScratchBuffer();
  readonly #recordsScratch = new ScratchBuffer();
  /** The client library's compressor: gzip from Node's zlib, snappy and lz4 from its optional native modules. */
  readonly #codec: BatchCodec | undefined;

  constructor(options: BaseOptions, compression: KafkaCompression = 'off') {
    super({ ...options, maxInflights: 1, retries: Number.MAX_SAFE_INTEGER });
    this.#codec = compression === 'off' ? undefined : compressionsAlgorithms[compression];
    // A codec whose native module is missing fails here, for an operator, not at each request.
    this.#codec?.compressSync(Buffer.alloc(1));
  }

  /**
   * Sends messages `from` to `to` (exclusive) to `topic`, each to the partition of its hash modulo
   * the topic's partitions, in order, all stamped `timestampMs`; resolves once every partition's
   * leader acknowledged them.
   */
  async send(topic: string, messages: KeyedMessages, from: number, to: number, timestampMs: number): Promise<void> {
    const identity = await this.#producerIdentity();
    const metadata = await this.#metadata(topic);
    const partitionsCount = metadata.topics.get(topic)!.partitionsCount;
    const byPartition: number[][] = [];
    for (let i = from; i < to; i++) {
      const partition = messages.hash(i) % partitionsCount;
      const own = byPartition[partition];
      if (own === undefined) byPartition[partition] = [i];
      else own.push(i);
    }
    const batches: PartitionMessages[] = [];
    byPartition.forEach((indices, partition) => {
      const baseSequence = this.#sequences.get(`${topic}:${partition}`) ?? 0;
      batches.push({ partition, baseSequence, indices });
    });
    await this.#sendToLeaders(topic, messages, batches, timestampMs, identity, metadata, true);
    for (const { partition, baseSequence, indices } of batches)
      this.#sequences.set(`${topic}:${partition}`, nextSequence(baseSequence, indices.length));
  }

  /** One request to each leader of the batches' partitions, at once; fails when any fails, once all answered. */
  async #sendToLeaders(
    topic: string,
    messages: MessageList,
    batches: readonly PartitionMessages[],
    timestampMs: number,
    identity: ProducerIdentity,
    metadata: ClusterMetadata,
    repeatOnStaleMetadata: boolean,
  ): Promise<void> {
    const partitions = metadata.topics.get(topic)!.partitions;
    const byLeader = new Map<number, PartitionMessages[]>();
    for (const batch of batches) {
      const leader = partitions[batch.partition]!.leader;
      const own = byLeader.get(leader);
      if (own === undefined) byLeader.set(leader, [batch]);
      else own.push(batch);
    }
    const outcomes = await Promise.allSettled(
      [...byLeader].map(async ([leader, own]) => {
        try {
          await this.#produce(metadata, leader, { topic, messages, partitions: own, timestampMs, ...identity }, repeatOnStaleMetadata);
        } catch (error) {
          if (!repeatOnStaleMetadata || !hasStaleMetadata(error)) throw error;
          // A leader moved: once more, each partition to its leader now.
          this.clearMetadata();
          await this.#sendToLeaders(topic, messages, own, timestampMs, identity, await this.#metadata(topic), false);
        }
      }),
    );
    const errors = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, 'Producing messages failed.');
  }

  /** One Produce request to `leader`, retried by the library (same bytes, same sequences) until acknowledged or closed. */
  #produce(
    metadata: ClusterMetadata,
    leader: number,
    request: { topic: string; messages: MessageList; partitions: readonly PartitionMessages[]; timestampMs: number } & ProducerIdentity,
    repeatOnStaleMetadata: boolean,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this[kPerformWithRetry]<unknown>(
        'produce',
        (retry) => {
          const broker = metadata.brokers.get(leader);
          // No leader (-1) while one is elected: an outage of the partition, for the sink to try later.
          if (broker === undefined) return retry(new Error(`no leader for ${request.topic} (broker ${leader} unknown)`), undefined);
          this[kGetConnection](broker, (error, connection) => {
            if (error) return retry(error, undefined);
            this[kGetApi]('Produce', (error, api) => {
              if (error) return retry(error, undefined);
              const parser = RESPONSE_PARSERS[api.version];
              if (parser === undefined)
                return retry(new Error(`Produce API version ${api.version} is not one this sink encodes`), undefined);
              // Encoded again for each attempt (the same bytes: same messages, sequences and time) into
              // the producer's one buffer, which the connection copies into the request it queues
              // before send returns: no buffer a request, and none kept through the retries.
              const body = encodeProduceRequest(
                { ...request, version: api.version, acks: ACKS_ALL, timeoutMs: this[kOptions].timeout!, codec: this.#codec },
                this.#scratch,
                this.#recordsScratch,
              );
              const flexible = api.version >= 9;
              connection.send(PRODUCE_API, api.version, () => new Writer(new DynamicBuffer(body)), parser, flexible, flexible, retry);
            });
          });
        },
        (error, response) => (error ? reject(error) : resolve(response)),
        0,
        [],
        (error) => repeatOnStaleMetadata && hasStaleMetadata(error),
      );
    });
  }

  /** The producer id and epoch the broker gave, asked for once (again after a failure). */
  #producerIdentity(): Promise<ProducerIdentity> {
    this.#identity ??= new Promise<ProducerIdentity>((resolve, reject) => {
      this[kPerformWithRetry]<ProducerIdentity>(
        'initProducerId',
        (retry) => {
          this[kGetBootstrapConnection]((error, connection) => {
            if (error) return retry(error, undefined as never);
            this[kGetApi]<InitProducerIdRequest, ProducerIdentity>('InitProducerId', (error, api) => {
              if (error) return retry(error, undefined as never);
              // As the library's producer asks: no transaction, its timeout, no earlier id.
              api(connection, null, this[kOptions].timeout!, 0n, 0, retry);
            });
          });
        },
        (error, response) => (error ? reject(error) : resolve({ producerId: response.producerId, producerEpoch: response.producerEpoch })),
        0,
      );
    });
    this.#identity.catch(() => {
      this.#identity = undefined;
    });
    return this.#identity;
  }

  #metadata(topic: string): Promise<ClusterMetadata> {
    return new Promise((resolve, reject) => {
      this[kMetadata]({ topics: [topic], autocreateTopics: false }, (error, metadata) => (error ? reject(error) : resolve(metadata)));
    });
  }
}
