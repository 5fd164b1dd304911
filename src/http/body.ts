import type { Context } from 'hono';
import { parseJsonBytes } from '../reading/json-bytes.js';
import type { ProblemDetail } from './problem-details.js';

export type BodyResult = { ok: true; json: unknown } | { ok: false; status: 400 | 413 | 415; message: string; details: ProblemDetail[] };

const BODY = ['body'];

const tooLarge = (limit: number): BodyResult => ({
  ok: false,
  status: 413,
  message: `Request body is larger than ${limit} bytes`,
  details: [{ loc: BODY, msg: `Body must be at most ${limit} bytes`, type: 'too_large' }],
});

/**
 * Reads and parses a JSON body. The declared length is checked before anything is read and a
 * chunked body is cut off at the limit, so an oversized body is never buffered whole.
 * Content-Type is not checked: devices and `curl -d` send all kinds; the body itself must be JSON.
 */
export async function readJsonBody(c: Context, limit: number): Promise<BodyResult> {
  const encoding = c.req.header('content-encoding');
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    return {
      ok: false,
      status: 415,
      message: `Content-Encoding ${encoding} is not supported; send the JSON body uncompressed`,
      details: [{ loc: ['header', 'content-encoding'], msg: 'Only identity is accepted', type: 'unsupported_encoding' }],
    };
  }
  const declared = c.req.header('content-length');
  if (declared !== undefined && Number(declared) > limit) return tooLarge(limit);
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
