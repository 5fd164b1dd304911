import { describe, expect, it } from 'vitest';
import { propertyRuns } from '../../../test/support/property-sizes.js';
import {
  compressionsAlgorithms,
  Reader,
  produceV7,
  produceV8,
  produceV9,
  produceV10,
  produceV11,
  readRecordsBatch,
} from '../../../test/support/kafka-client.js';
import fc from 'fast-check';
import { encodeProduceRequest, type MessageList, nextSequence, type ProduceRequest } from './produce-request.js';

/** A message of any key and value text; `told` stands in for a value that miscounts its bytes. */
interface TextMessage {
  key: string;
  value: string;
  told?: number;
}

/** Messages of any text, as a request's MessageList. */
class TextMessages implements MessageList {
  constructor(readonly list: readonly TextMessage[]) {}
  keyBytes(i: number): number {
    return Buffer.byteLength(this.list[i]!.key);
  }
  valueBytes(i: number): number {
    return this.list[i]!.told ?? Buffer.byteLength(this.list[i]!.value);
  }
  writeKey(i: number, out: Buffer, at: number): number {
    return at + out.write(this.list[i]!.key, at, 'utf8');
  }
  writeValue(i: number, out: Buffer, at: number): number {
    return at + out.write(this.list[i]!.value, at, 'utf8');
  }
}

/** A request whose partitions hold these messages in turn, with the indices of each. */
function withMessages(
  request: Omit<ProduceRequest, 'messages' | 'partitions'>,
  partitions: readonly { partition: number; baseSequence: number; messages: readonly TextMessage[] }[],
): ProduceRequest {
  const list: TextMessage[] = [];
  return {
    ...request,
    partitions: partitions.map(({ partition, baseSequence, messages }) => ({
      partition,
      baseSequence,
      indices: messages.map((m) => list.push(m) - 1),
    })),
    messages: new TextMessages(list),
  };
}

const CLIENT_APIS = { 7: produceV7, 8: produceV8, 9: produceV9, 10: produceV10, 11: produceV11 } as const;

const CODECS = ['gzip', 'snappy', 'lz4'] as const;

/** The same request as the client library's Produce API writes it for its producer, compressed with `compression`. */
function clientEncoding(request: ProduceRequest, compression?: (typeof CODECS)[number]): Buffer {
  const { list } = request.messages as TextMessages;
  const messages = request.partitions.flatMap(({ partition, indices }) =>
    indices.map((i) => ({
      topic: request.topic,
      partition,
      key: Buffer.from(list[i]!.key),
      value: Buffer.from(list[i]!.value),
      headers: new Map<Buffer, Buffer>(),
      timestamp: BigInt(request.timestampMs),
    })),
  );
  const first = new Map(request.partitions.map((p) => [`${request.topic}:${p.partition}`, p.baseSequence]));
  const sequences = { getWithDefault: (key: string) => first.get(key) ?? 0 };
  const api = CLIENT_APIS[request.version as keyof typeof CLIENT_APIS];
  // The client's own types do not name the sequences' map it is handed; it reads it with getWithDefault alone.
  const options = { producerId: request.producerId, producerEpoch: request.producerEpoch, sequences, compression } as never;
  return api.createRequest(request.acks, request.timeoutMs, messages, options).buffer;
}

const text = fc.string({ unit: 'grapheme', maxLength: 200 });
const request = fc
  .record({
    version: fc.constantFrom(7, 8, 9, 10, 11),
    acks: fc.constantFrom(-1, 1),
    timeoutMs: fc.integer({ min: 0, max: 60_000 }),
    topic: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 40 }),
    producerId: fc.bigInt({ min: 0n, max: 2n ** 62n }),
    producerEpoch: fc.integer({ min: 0, max: 32_767 }),
    timestampMs: fc.integer({ min: 0, max: 4_102_444_800_000 }),
    partitions: fc.uniqueArray(
      fc.record({
        partition: fc.integer({ min: 0, max: 1000 }),
        baseSequence: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        messages: fc.array(fc.record({ key: text, value: text }), { minLength: 1, maxLength: 30 }),
      }),
      { minLength: 1, maxLength: 4, selector: (p) => p.partition },
    ),
  })
  // Partitions in ascending order, as the client puts them (and as the sink sends them).
  .map(({ partitions, ...r }) =>
    withMessages(
      r,
      [...partitions].sort((a, b) => a.partition - b.partition),
    ),
  );

describe('a Produce request encoded in one buffer', () => {
  it("is byte for byte the client library's for the same messages, in every Produce version it speaks", () => {
    fc.assert(
      fc.property(request, (r) => encodeProduceRequest(r).equals(clientEncoding(r))),
      { numRuns: propertyRuns(300) },
    );
  });

  it.each(CODECS)("compressed with %s, is byte for byte the client library's with that compression", (codec) => {
    fc.assert(
      fc.property(request, (r) => encodeProduceRequest({ ...r, codec: compressionsAlgorithms[codec] }).equals(clientEncoding(r, codec))),
      { numRuns: propertyRuns(100) },
    );
  });

  it('holds record batches whose CRC-32C, records and sequence the client reads back, compressed or not', () => {
    const messages = Array.from({ length: 150 }, (_, i) => ({
      key: `MV Ærø ${i % 7}`,
      value: `{"time":"2026-11-27T12:00:00.000000001Z","ship_id":"MV Ærø ${i}","value":${i}}`,
    }));
    const request = withMessages(
      { version: 11, acks: -1, timeoutMs: 5000, topic: 'readings', producerId: 4242n, producerEpoch: 3, timestampMs: 1_795_780_800_123 },
      [{ partition: 2, baseSequence: 9000, messages }],
    );
    const plainBytes = encodeProduceRequest(request).length;
    for (const codec of [undefined, ...CODECS]) {
      const body = encodeProduceRequest({ ...request, codec: codec === undefined ? undefined : compressionsAlgorithms[codec] });
      // transactional_id, acks, timeout, one topic named "readings", one partition (2), then the batch's length.
      const reader = Reader.from(body.subarray(1 + 2 + 4 + 1 + 1 + 8 + 1 + 4 + 2));
      const batch = readRecordsBatch(reader);
      const attributes = codec === undefined ? 0 : compressionsAlgorithms[codec].bitmask;
      expect(batch).toMatchObject({ magic: 2, attributes, producerId: 4242n, producerEpoch: 3, firstSequence: 9000 });
      expect(batch.firstTimestamp).toBe(1_795_780_800_123n);
      expect(batch.records.map((r) => [r.key.toString(), r.value.toString()])).toEqual(messages.map((m) => [m.key, m.value]));
      if (codec !== undefined) expect(body.length, codec).toBeLessThan(plainBytes / 4);
    }
  });

  it('refuses a value that writes other than the bytes it told, rather than send a batch its lengths belie', () => {
    const encode = (message: TextMessage) =>
      encodeProduceRequest(
        withMessages({ version: 11, acks: -1, timeoutMs: 1, topic: 't', producerId: 1n, producerEpoch: 0, timestampMs: 0 }, [
          { partition: 0, baseSequence: 0, messages: [message] },
        ]),
      );
    expect(() => encode({ key: 'k', value: 'Ærø', told: 3 })).toThrow(/wrote 5 bytes, not the 3 it told/);
    expect(() => encode({ key: 'k', value: 'Ærø', told: 6 })).toThrow(/wrote 5 bytes, not the 6 it told/);
    expect(encode({ key: 'k', value: 'Ærø' })).toBeInstanceOf(Buffer);
  });
});

describe("the idempotent producer's sequence numbers", () => {
  it('count on, and wrap to 0 past the largest int32 as Kafka does', () => {
    expect(nextSequence(0, 5)).toBe(5);
    expect(nextSequence(2 ** 31 - 1 - 5, 5)).toBe(2 ** 31 - 1);
    expect(nextSequence(2 ** 31 - 1, 1)).toBe(0);
    expect(nextSequence(2 ** 31 - 3, 5)).toBe(2);
  });
});
