import type { Context } from 'hono';
import { parseJsonBytes } from '../reading/json-bytes.js';
import { type BodyRefusal, readEncodedBody } from './encoded-body.js';

export type BodyResult = { ok: true; json: unknown } | BodyRefusal;

const BODY = ['body'];

const tooLarge = (limit: number): BodyResult => ({
  ok: false,
  status: 413,
  message: `Request body is larger than ${limit} bytes`,
  details: [{ loc: BODY, msg: `Body must be at most ${limit} bytes`, type: 'too_large' }],
});

const isEncoded = (encoding: string | undefined): encoding is string => encoding !== undefined && encoding.toLowerCase() !== 'identity';

/**
 * What a request's body may take in memory while it is read, for the in-flight budget: its declared
 * length, or the limit when it is chunked or compressed (decompressed, it may reach the limit).
 */
export function bodyReservation(c: Context, limit: number): number {
  if (isEncoded(c.req.header('content-encoding'))) return limit;
  const declared = Number(c.req.header('content-length') ?? limit);
  return Math.min(Number.isFinite(declared) ? declared : limit, limit);
}

/**
 * Reads and parses a JSON body. The declared length is checked before anything is read and a
 * chunked body is cut off at the limit, so an oversized body is never buffered whole; a compressed
 * one is decompressed as it arrives, its limit applied to the decompressed bytes (`encoded-body.ts`).
 * Content-Type is not checked: devices and `curl -d` send all kinds; the body itself must be JSON.
 */
export async function readJsonBody(c: Context, limit: number): Promise<BodyResult> {
  const encoding = c.req.header('content-encoding');
  const declared = c.req.header('content-length');
  if (declared !== undefined && Number(declared) > limit) return tooLarge(limit);
  if (isEncoded(encoding)) {
    const decoded = await readEncodedBody(c.req.raw.body, encoding, limit);
    return decoded.ok ? jsonOf(decoded.bytes) : decoded;
  }
  let bytes: Buffer;
  try {
    // From the Request itself, not through c.req: Hono keeps what c.req read for the request's
    // whole life, and ingest's commit waits a turn of the event loop or more, long enough for
    // minor garbage collections to copy and then promote a batch's body.
    const read = declared !== undefined ? Buffer.from(await c.req.raw.arrayBuffer()) : await readLimited(c.req.raw.body, limit);
    if (read === undefined) return tooLarge(limit);
    bytes = read;
  } catch {
    // The client went away mid-body; nobody reads this answer, but it is not a server error.
    return {
      ok: false,
      status: 400,
      message: 'Body could not be read',
      details: [{ loc: BODY, msg: 'Connection closed before the body was complete', type: 'body_incomplete' }],
    };
  }
  return jsonOf(bytes);
}

function jsonOf(bytes: Buffer): BodyResult {
  const parsed = parseJsonBytes(bytes, BODY);
  return parsed.ok ? parsed : { ok: false, status: 400, message: parsed.message, details: parsed.details };
}

/** Reads a stream up to `limit` bytes; undefined when it is longer. */
async function readLimited(stream: ReadableStream<Uint8Array> | null, limit: number): Promise<Buffer | undefined> {
  if (stream === null) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let length = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks, length);
    length += value.byteLength;
    if (length > limit) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
}
