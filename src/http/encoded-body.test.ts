import { brotliCompressSync, constants, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readEncodedBody } from './encoded-body.js';

const MiB = 1024 * 1024;

/** A request body as the server hands it over, in chunks of `chunkBytes`, counting what was pulled from it. */
function body(bytes: Buffer, chunkBytes = 64 * 1024) {
  const pulled = { bytes: 0, cancelled: false };
  let at = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      const chunk = bytes.subarray(at, at + chunkBytes);
      at += chunk.length;
      pulled.bytes += chunk.length;
      controller.enqueue(chunk);
    },
    cancel() {
      pulled.cancelled = true;
    },
  });
  return { stream, pulled };
}

/** A body of `members` gzip members, each `memberBytes` of zeros: cheap to make, `members × memberBytes` inflated. */
function gzipMembers(members: number, memberBytes: number): Buffer {
  const member = gzipSync(Buffer.alloc(memberBytes));
  return Buffer.concat(new Array(members).fill(member));
}

const json = Buffer.from(JSON.stringify([{ time: '2026-05-27T10:00:00Z', ship_id: 'MV-1', cargo_id: 'temp', value: 12.37 }]));

describe('a compressed request body', () => {
  it.each([
    ['gzip', gzipSync(json)],
    ['x-gzip', gzipSync(json)],
    [' GZip ', gzipSync(json)],
    ['deflate', deflateSync(json)],
    ['deflate', deflateRawSync(json)],
    ['br', brotliCompressSync(json)],
  ])('is read whole with Content-Encoding %j', async (encoding, compressed) => {
    expect(await readEncodedBody(body(compressed, 3).stream, encoding, MiB)).toEqual({ ok: true, bytes: json });
  });

  it('of concatenated gzip members is their contents, one after another', async () => {
    const parts = [Buffer.from('[{"ship_id":"a",'), Buffer.from('"cargo_id":"b","value":1}]')];
    const result = await readEncodedBody(body(Buffer.concat(parts.map((p) => gzipSync(p)))).stream, 'gzip', MiB);
    expect(result).toEqual({ ok: true, bytes: Buffer.concat(parts) });
  });

  it('is refused with 415 naming the codings taken, for an unknown coding or several', async () => {
    for (const encoding of ['zstd', 'compress', 'identity, br', 'gzip, gzip', 'deflate, gzip']) {
      const result = await readEncodedBody(body(gzipSync(json)).stream, encoding, MiB);
      expect(result).toMatchObject({
        ok: false,
        status: 415,
        details: [{ loc: ['header', 'content-encoding'], type: 'unsupported_encoding' }],
        headers: { 'Accept-Encoding': 'gzip, deflate, br' },
      });
      expect((result as { message: string }).message).toContain(encoding);
    }
  });

  it.each([
    ['not compressed at all', 'gzip', json],
    ['cut short', 'gzip', gzipSync(json).subarray(0, 20)],
    ['followed by other bytes', 'gzip', Buffer.concat([gzipSync(json), Buffer.from('trailing')])],
    ['empty', 'gzip', Buffer.alloc(0)],
    ['deflate cut short', 'deflate', deflateSync(json).subarray(0, 10)],
    ['br cut short', 'br', brotliCompressSync(json).subarray(0, 10)],
  ])('is refused with 400 when it is %s', async (_what, encoding, bytes) => {
    const result = await readEncodedBody(body(bytes).stream, encoding, MiB);
    expect(result).toMatchObject({ ok: false, status: 400, details: [{ loc: ['body'], type: 'encoding_invalid' }] });
    expect((result as { message: string }).message).toMatch(new RegExp(`not a whole ${encoding} stream`));
  });

  it('is refused with 400 body_incomplete when the client goes away mid-body', async () => {
    const compressed = gzipSync(json);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(compressed.subarray(0, 10));
        controller.error(new Error('aborted'));
      },
    });
    expect(await readEncodedBody(stream, 'gzip', MiB)).toMatchObject({ ok: false, status: 400, details: [{ type: 'body_incomplete' }] });
  });

  it('that inflates past the limit is refused with 413 once the limit is passed, not once it is all inflated', async () => {
    const cases: [string, Buffer][] = [
      // 16 MiB of zeros in one gzip member, one deflate and one Brotli stream: 16 KiB or less each.
      ['gzip', gzipSync(Buffer.alloc(16 * MiB))],
      ['deflate', deflateSync(Buffer.alloc(16 * MiB))],
      ['br', brotliCompressSync(Buffer.alloc(16 * MiB), { params: { [constants.BROTLI_PARAM_QUALITY]: 1 } })],
      // 4 GiB in 4,096 members of 1 MiB: about 4 MiB sent.
      ['gzip', gzipMembers(4096, MiB)],
    ];
    for (const [encoding, bomb] of cases) {
      const { stream, pulled } = body(bomb, 1024);
      const rssBefore = process.memoryUsage().rss;
      const result = await readEncodedBody(stream, encoding, MiB);
      expect(result).toMatchObject({ ok: false, status: 413, details: [{ loc: ['body'], type: 'too_large' }] });
      // Inflated to the limit and a few 16 KiB chunks of zlib and the streams, never to the whole.
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(32 * MiB);
      // Reading stopped near the limit: 1 MiB inflates from about 1 KiB, and zlib takes 16 KiB ahead.
      expect(pulled.bytes).toBeLessThan(64 * 1024);
      if (pulled.bytes < bomb.length) expect(pulled.cancelled).toBe(true);
    }
  });

  it('of more compressed bytes than the limit is refused with 413, even when they inflate to nothing', async () => {
    const empty = gzipSync(Buffer.alloc(0));
    const members = Buffer.concat(new Array(Math.ceil((2 * MiB) / empty.length)).fill(empty));
    const { stream, pulled } = body(members);
    expect(await readEncodedBody(stream, 'gzip', MiB)).toMatchObject({ ok: false, status: 413 });
    // The limit, and the chunk the stream reads ahead.
    expect(pulled.bytes).toBeLessThanOrEqual(MiB + 2 * 64 * 1024);
  });

  it('compressed twice under one coding is inflated once: what is left is the inner stream, no larger than it', async () => {
    const inner = gzipSync(Buffer.alloc(16 * MiB));
    const result = await readEncodedBody(body(gzipSync(inner)).stream, 'gzip', MiB);
    expect(result).toEqual({ ok: true, bytes: inner });
  });
});
