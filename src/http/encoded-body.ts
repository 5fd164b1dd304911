import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createBrotliDecompress, createGunzip, createInflate, createInflateRaw } from 'node:zlib';
import type { ProblemDetail } from './problem-details.js';

/**
 * The content codings a request body may come in, as an answer's `Accept-Encoding` names them.
 * zstd is not among them: Node's zlib has it from 22.15 on, and the gateway runs on Node 20.
 */
export const ACCEPTED_ENCODINGS = 'gzip, deflate, br';

type Coding = 'gzip' | 'deflate' | 'br';

/** A body refused before or while it was read: the status, what was wrong and where, and headers for the answer. */
export interface BodyRefusal {
  ok: false;
  status: 400 | 413 | 415;
  message: string;
  details: ProblemDetail[];
  headers?: Record<string, string>;
}

const BODY = ['body'];
const ENCODING_LOC = ['header', 'content-encoding'];

/** `gzip` (or its old name `x-gzip`), `deflate` or `br`, whatever their case; undefined for anything else. */
function codingOf(header: string): Coding | undefined {
  const name = header.trim().toLowerCase();
  if (name === 'gzip' || name === 'x-gzip') return 'gzip';
  if (name === 'deflate' || name === 'br') return name;
  return undefined;
}

function decompressor(coding: Coding, head: Buffer) {
  if (coding === 'gzip') return createGunzip();
  if (coding === 'br') return createBrotliDecompress();
  return isZlibHeader(head) ? createInflate() : createInflateRaw();
}

class TooLarge extends Error {}

/**
 * Reads a body sent with `Content-Encoding: encoding` and decompresses it as it arrives, up to
 * `limit` bytes each way: the decompressed bytes are refused (413) as soon as they pass the limit,
 * and so are compressed bytes past it (a stream of empty blocks would otherwise run for ever).
 * zlib (and its Brotli decoder) stops inflating while the bytes it made are not taken, so a small body that inflates to
 * gigabytes costs no more memory than the limit and a few 16 KiB chunks. Concatenated gzip members
 * are one body, as gzip itself reads them. `deflate` is the zlib format (RFC 9110), or raw deflate
 * as some clients send it, told apart by the zlib header. One coding only: a body compressed twice
 * is refused (415), so no request inflates more than once.
 */
export async function readEncodedBody(
  stream: ReadableStream<Uint8Array> | null,
  encoding: string,
  limit: number,
): Promise<{ ok: true; bytes: Buffer } | BodyRefusal> {
  const coding = codingOf(encoding);
  if (coding === undefined) return unsupported(encoding);
  const reader = (stream ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() })).getReader();
  const received = { bytes: 0, failed: false };
  const head = await readHead(reader, received);
  if (head === undefined) return incomplete();
  const inflated: Buffer[] = [];
  let length = 0;
  const collect = new Writable({
    write(chunk: Buffer, _encoding, done) {
      length += chunk.length;
      if (length > limit) return done(new TooLarge());
      inflated.push(chunk);
      done();
    },
  });
  try {
    await pipeline(compressed(reader, head, received, limit), decompressor(coding, head), collect);
  } catch (error) {
    if (error instanceof TooLarge) return tooLarge(limit);
    if (received.failed) return incomplete();
    return corrupt(coding, error);
  }
  return { ok: true, bytes: Buffer.concat(inflated, length) };
}

/** The first bytes (at least two, unless the body is shorter), to tell zlib's header from raw deflate. */
async function readHead(reader: ReadableStreamDefaultReader<Uint8Array>, received: { bytes: number; failed: boolean }) {
  const parts: Uint8Array[] = [];
  try {
    while (received.bytes < 2) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      received.bytes += value.byteLength;
    }
  } catch {
    received.failed = true;
    return undefined;
  }
  return Buffer.concat(parts);
}

/** RFC 1950: compression method 8 with a window up to 32 KiB, and a check that makes the two bytes a multiple of 31. */
const isZlibHeader = (head: Buffer): boolean =>
  head.length >= 2 && (head[0]! & 0x0f) === 8 && head[0]! >> 4 <= 7 && ((head[0]! << 8) | head[1]!) % 31 === 0;

/** The compressed bytes, `head` first; past `limit` of them, TooLarge. Cancels the request's body when stopped early. */
async function* compressed(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  head: Buffer,
  received: { bytes: number; failed: boolean },
  limit: number,
): AsyncGenerator<Uint8Array> {
  let finished = false;
  try {
    if (received.bytes > limit) throw new TooLarge();
    if (head.length > 0) yield head;
    for (;;) {
      const chunk = await reader.read().catch((error: unknown) => {
        received.failed = true;
        throw error;
      });
      if (chunk.done) {
        finished = true;
        return;
      }
      received.bytes += chunk.value.byteLength;
      if (received.bytes > limit) throw new TooLarge();
      yield chunk.value;
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
  }
}

function unsupported(encoding: string): BodyRefusal {
  const several = encoding.includes(',');
  return {
    ok: false,
    status: 415,
    message: several
      ? `Content-Encoding ${encoding} names several codings; compress the body once, with gzip, deflate or br`
      : `Content-Encoding ${encoding} is not supported; send the body compressed with gzip, deflate or br, or uncompressed`,
    details: [
      {
        loc: ENCODING_LOC,
        msg: several ? 'One coding only: gzip, deflate, br or identity' : 'Accepted: gzip, deflate, br, identity',
        type: 'unsupported_encoding',
      },
    ],
    headers: { 'Accept-Encoding': ACCEPTED_ENCODINGS },
  };
}

const tooLarge = (limit: number): BodyRefusal => ({
  ok: false,
  status: 413,
  message: `Request body is larger than ${limit} bytes, compressed or decompressed`,
  details: [{ loc: BODY, msg: `Body must be at most ${limit} bytes, compressed and decompressed`, type: 'too_large' }],
});

function corrupt(coding: Coding, error: unknown): BodyRefusal {
  const reason = (error as { message?: string }).message ?? String(error);
  return {
    ok: false,
    status: 400,
    message: `Body could not be decompressed: it is not a whole ${coding} stream (${reason})`,
    details: [{ loc: BODY, msg: `Body must be ${coding} compressed as Content-Encoding says: ${reason}`, type: 'encoding_invalid' }],
  };
}

// The client went away mid-body; nobody reads this answer, but it is not a server error.
const incomplete = (): BodyRefusal => ({
  ok: false,
  status: 400,
  message: 'Body could not be read',
  details: [{ loc: BODY, msg: 'Connection closed before the body was complete', type: 'body_incomplete' }],
});
