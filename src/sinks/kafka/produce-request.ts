import { crc32c } from './crc32c.js';

/**
 * The messages a request is made of, by index: each writes its own key and value, `keyBytes(i)`
 * and `valueBytes(i)` of them into `out` at `at`, returning where it ended.
 */
export interface MessageList {
  keyBytes(i: number): number;
  valueBytes(i: number): number;
  writeKey(i: number, out: Buffer, at: number): number;
  writeValue(i: number, out: Buffer, at: number): number;
}

/** A partition's messages in order (indices into the request's messages), and the idempotent producer's sequence number of the first. */
export interface PartitionMessages {
  partition: number;
  baseSequence: number;
  indices: readonly number[];
}

/** A record batch codec: Kafka's number for it (the attributes' low bits) and a compressor of the records. */
export interface BatchCodec {
  bitmask: number;
  compressSync(records: Buffer): Buffer;
}

/** A Produce request's body (after the request header) for one topic. */
export interface ProduceRequest {
  /** The Produce API version: 7 and 8 are Kafka's old encoding, 9 to 11 its compact (flexible) one. */
  version: number;
  acks: number;
  timeoutMs: number;
  topic: string;
  producerId: bigint;
  producerEpoch: number;
  /** Every message's timestamp (epoch ms): a request's messages are stamped alike. */
  timestampMs: number;
  messages: MessageList;
  partitions: readonly PartitionMessages[];
  /** Each batch's records compressed with it; uncompressed when undefined. */
  codec?: BatchCodec | undefined;
}

/** A buffer written again for each request, grown to the largest. */
export class ScratchBuffer {
  #buffer = Buffer.alloc(0);

  /** `bytes` of it, whose contents are the next caller's to overwrite. */
  take(bytes: number): Buffer {
    if (this.#buffer.length < bytes) this.#buffer = Buffer.allocUnsafe(Math.max(bytes, 2 * this.#buffer.length));
    return this.#buffer.subarray(0, bytes);
  }
}

const MAGIC = 2;
// Batch header from partitionLeaderEpoch to the record count, after baseOffset and batchLength.
const BATCH_HEADER_BYTES = 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;
// Where the CRC-32C starts (attributes) and where the CRC is, from the batch's first byte.
const CRC_AT = 8 + 4 + 4 + 1;
const CRC_FROM = CRC_AT + 4;

const uvarintBytes = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);
// Record fields are zigzag varints; every one written here is a length, count or delta, never negative.
const varintBytes = (n: number): number => uvarintBytes(n * 2);

/** A record's bytes after its length: attributes, timestamp delta (0), offset delta, key, value, no headers. */
const recordBodyBytes = (keyBytes: number, valueBytes: number, offsetDelta: number): number =>
  1 + 1 + varintBytes(offsetDelta) + varintBytes(keyBytes) + keyBytes + varintBytes(valueBytes) + valueBytes + 1;

/**
 * Writes `n` as an unsigned varint at `at`, returning where it ended. A function of its own, not a
 * closure over the encoder's position: a position captured and written by a closure lives in a
 * context object, and every byte the encoder writes reads and writes it.
 */
function putUvarint(out: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  out[at++] = n;
  return at;
}

const putVarint = (out: Buffer, at: number, n: number): number => putUvarint(out, at, n * 2);

const BATCH_FRAME_BYTES = 8 + 4 + BATCH_HEADER_BYTES;

/** The records of the messages at `indices`, uncompressed, as a RecordBatch holds them after its header. */
function recordsBytes(messages: MessageList, indices: readonly number[]): number {
  let bytes = 0;
  for (let i = 0; i < indices.length; i++) {
    const m = indices[i]!;
    const body = recordBodyBytes(messages.keyBytes(m), messages.valueBytes(m), i);
    bytes += varintBytes(body) + body;
  }
  return bytes;
}

/** Writes the records of the messages at `indices` at `at`, returning where they ended. */
function writeRecords(out: Buffer, at: number, messages: MessageList, indices: readonly number[]): number {
  for (let i = 0; i < indices.length; i++) {
    const m = indices[i]!;
    const keyBytes = messages.keyBytes(m);
    const valueBytes = messages.valueBytes(m);
    at = putVarint(out, at, recordBodyBytes(keyBytes, valueBytes, i));
    out[at++] = 0; // attributes
    out[at++] = 0; // timestamp delta
    at = putVarint(out, at, i);
    at = putVarint(out, at, keyBytes);
    let end = messages.writeKey(m, out, at);
    if (end - at !== keyBytes) throw new Error(`a message key wrote ${end - at} bytes, not the ${keyBytes} it told`);
    at = end;
    at = putVarint(out, at, valueBytes);
    end = messages.writeValue(m, out, at);
    if (end - at !== valueBytes) throw new Error(`a message value wrote ${end - at} bytes, not the ${valueBytes} it told`);
    at = end;
    out[at++] = 0; // headers
  }
  return at;
}

/** Each partition's records compressed with `codec`, written first into `scratch`. */
function compressedRecords(request: ProduceRequest, codec: BatchCodec, scratch: ScratchBuffer | undefined): Buffer[] {
  return request.partitions.map(({ indices }) => {
    const bytes = recordsBytes(request.messages, indices);
    const records = scratch?.take(bytes) ?? Buffer.allocUnsafe(bytes);
    writeRecords(records, 0, request.messages, indices);
    return codec.compressSync(records);
  });
}

/**
 * A Produce request's body in one buffer (of `scratch`, when given), each partition's messages one
 * RecordBatch (magic 2, no headers, CRC-32C; its records compressed with the request's codec, then
 * first written into `recordsScratch`), byte for byte what the client library's Produce API writes
 * for the same messages and compression: consumers read the same records, and the broker
 * deduplicates a resent request by the producer id, epoch and sequence numbers in it.
 */
export function encodeProduceRequest(request: ProduceRequest, scratch?: ScratchBuffer, recordsScratch?: ScratchBuffer): Buffer {
  const flexible = request.version >= 9;
  const topic = Buffer.from(request.topic);
  const messages = request.messages;
  const codec = request.codec;
  const compressed = codec === undefined ? undefined : compressedRecords(request, codec, recordsScratch);
  const sizes = request.partitions.map(
    (p, i) => BATCH_FRAME_BYTES + (compressed === undefined ? recordsBytes(messages, p.indices) : compressed[i]!.length),
  );
  let total = (flexible ? 1 : 2) + 2 + 4;
  total += flexible ? 1 + uvarintBytes(topic.length + 1) + uvarintBytes(request.partitions.length + 1) : 4 + 2 + 4;
  total += topic.length;
  for (const size of sizes) total += 4 + (flexible ? uvarintBytes(size + 1) + 1 : 4) + size;
  if (flexible) total += 2;

  const out = scratch?.take(total) ?? Buffer.allocUnsafe(total);
  let at = 0;

  // transactional_id: none
  if (flexible) out[at++] = 0;
  else at = out.writeInt16BE(-1, at);
  at = out.writeInt16BE(request.acks, at);
  at = out.writeInt32BE(request.timeoutMs, at);
  if (flexible) {
    at = putUvarint(out, at, 2);
    at = putUvarint(out, at, topic.length + 1);
  } else {
    at = out.writeInt32BE(1, at);
    at = out.writeInt16BE(topic.length, at);
  }
  at += topic.copy(out, at);
  if (flexible) at = putUvarint(out, at, request.partitions.length + 1);
  else at = out.writeInt32BE(request.partitions.length, at);

  const timestamp = BigInt(request.timestampMs);
  for (let p = 0; p < request.partitions.length; p++) {
    const { partition, baseSequence, indices } = request.partitions[p]!;
    const size = sizes[p]!;
    at = out.writeInt32BE(partition, at);
    if (flexible) at = putUvarint(out, at, size + 1);
    else at = out.writeInt32BE(size, at);
    const start = at;
    at = out.writeBigInt64BE(0n, at); // baseOffset: the broker assigns it
    at = out.writeInt32BE(size - 12, at);
    at = out.writeInt32BE(0, at); // partitionLeaderEpoch
    out[at++] = MAGIC;
    at += 4; // the CRC, once the rest is written
    at = out.writeInt16BE(codec?.bitmask ?? 0, at); // attributes: the codec, no transaction
    at = out.writeInt32BE(indices.length - 1, at);
    at = out.writeBigInt64BE(timestamp, at);
    at = out.writeBigInt64BE(timestamp, at);
    at = out.writeBigInt64BE(request.producerId, at);
    at = out.writeInt16BE(request.producerEpoch, at);
    at = out.writeInt32BE(baseSequence, at);
    at = out.writeInt32BE(indices.length, at);
    at = compressed === undefined ? writeRecords(out, at, messages, indices) : at + compressed[p]!.copy(out, at);
    out.writeUInt32BE(crc32c(out, start + CRC_FROM, at), start + CRC_AT);
    if (flexible) out[at++] = 0; // the partition's tagged fields
  }
  if (flexible) {
    out[at++] = 0; // the topic's tagged fields
    out[at++] = 0; // the request's
  }
  return out;
}

/** Kafka's next sequence number after `count` more messages: it wraps to 0 past the largest int32. */
export function nextSequence(sequence: number, count: number): number {
  return sequence > 0x7fffffff - count ? count - (0x7fffffff - sequence) - 1 : sequence + count;
}
