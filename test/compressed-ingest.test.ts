import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { brotliCompressSync, constants, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERIES_MEDIA_TYPE } from '../src/reading/series-form.js';
import { TEST_KEY, jsonAnswer, startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { waitUntil } from './support/wait.js';

const KiB = 1024;
const MiB = 1024 * KiB;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ MAX_BODY_BYTES: '64KiB', MAX_BATCH_READINGS: '1000' });
});
afterAll(() => gw.stop());

/** POSTs `body` as it is (already compressed) with `headers`. */
const send = (path: string, body: Buffer | string, headers: Record<string, string> = {}) =>
  fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'x-api-key': TEST_KEY, ...headers }, body });

/** POSTs `body` in chunks without a Content-Length, as a client streaming a compressed body does; the status and body of the answer. */
function sendChunked(
  path: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${gw.url}${path}`,
      { method: 'POST', headers: { 'x-api-key': TEST_KEY, 'transfer-encoding': 'chunked', ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (part: string) => {
          text += part;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    // The server answers 413 and closes while the client still writes: that is the point.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    for (let at = 0; at < body.length; at += 16 * KiB) req.write(body.subarray(at, at + 16 * KiB));
    req.end();
  });
}

/** The stored rows of one ship, once flushed and applied. */
async function rowsOf(ship: string): Promise<[string, number, string][]> {
  await waitForDrained(gw);
  await waitForWalApplied(gw.table);
  return (
    await sql<[string, number, string]>(`SELECT cargo_id, value, time FROM "${gw.table}" WHERE ship_id = '${ship}' ORDER BY time, cargo_id`)
  ).dataset;
}

describe('compressed bodies at every ingest endpoint', () => {
  it('stores what gzip, deflate and br bodies hold, as their plain bodies would', async () => {
    const batch = Array.from({ length: 200 }, (_, i) => ({
      time: new Date(Date.UTC(2026, 4, 27, 10, 0, 0) + i * 5000).toISOString(),
      ship_id: 'zip-1',
      cargo_id: i % 2 === 0 ? 'temp' : 'rpm',
      value: i % 2 === 0 ? 12 + i / 100 : 1500 + i,
    }));
    const json = JSON.stringify(batch);
    expect(await jsonAnswer(await send('/api/v2/ingest/batch', gzipSync(json), { 'content-encoding': 'gzip' }))).toEqual({
      status: 200,
      body: { status: 'Batch data received and queued', count: 200 },
    });
    const single = { time: '2026-05-27T09:00:00.123456789Z', ship_id: 'zip-1', cargo_id: 'single', value: -0.5 };
    expect((await send('/api/v2/ingest', deflateSync(JSON.stringify(single)), { 'content-encoding': 'deflate' })).status).toBe(200);
    const raw = { ...single, cargo_id: 'raw-deflate' };
    expect((await send('/api/v2/ingest/harbor-1', deflateRawSync(JSON.stringify(raw)), { 'content-encoding': 'Deflate' })).status).toBe(
      200,
    );
    const brotli = { ...single, cargo_id: 'brotli' };
    expect((await send('/api/v2/ingest', brotliCompressSync(JSON.stringify(brotli)), { 'content-encoding': 'br' })).status).toBe(200);
    const fix = { ship_id: 'zip-1', time: '2026-05-27T08:00:00Z', latitude: 53.5461, longitude: 9.9661 };
    expect(
      await jsonAnswer(await send('/api/v2/ingest/gps', gzipSync(JSON.stringify(fix)), { 'content-encoding': 'x-gzip' })),
    ).toMatchObject({
      status: 200,
      body: { count: 2 },
    });
    const uplink = {
      end_device_ids: { device_id: 'zip-1' },
      uplink_message: { received_at: '2026-05-27T07:00:00Z', decoded_payload: { battery: 3.3 } },
    };
    expect((await sendChunked('/api/v2/ingest/ttn', gzipSync(JSON.stringify(uplink)), { 'content-encoding': 'gzip' })).status).toBe(200);

    const rows = await rowsOf('zip-1');
    expect(rows).toHaveLength(200 + 3 + 2 + 1);
    expect(rows).toContainEqual(['brotli', -0.5, '2026-05-27T09:00:00.123456789Z']);
    expect(rows).toContainEqual(['single', -0.5, '2026-05-27T09:00:00.123456789Z']);
    expect(rows).toContainEqual(['raw-deflate', -0.5, '2026-05-27T09:00:00.123456789Z']);
    expect(rows).toContainEqual(['latitude', 53.5461, '2026-05-27T08:00:00.000000000Z']);
    expect(rows).toContainEqual(['battery', 3.3, '2026-05-27T07:00:00.000000000Z']);
    for (const r of batch) expect(rows).toContainEqual([r.cargo_id, r.value, r.time.replace('Z', '000000Z')]);
  });

  it('answers 413 to a body that inflates past MAX_BODY_BYTES, without inflating it whole', async () => {
    const member = gzipSync(Buffer.alloc(MiB));
    const bombs: [string, Buffer, string][] = [
      ['gzip, 16 MiB of zeros', gzipSync(Buffer.alloc(16 * MiB)), 'gzip'],
      ['deflate, 16 MiB of zeros', deflateSync(Buffer.alloc(16 * MiB)), 'deflate'],
      ['br, 64 MiB of zeros', brotliCompressSync(Buffer.alloc(64 * MiB), { params: { [constants.BROTLI_PARAM_QUALITY]: 1 } }), 'br'],
      ['gzip, 1 GiB in 1,024 concatenated members', Buffer.concat(new Array(1024).fill(member)), 'gzip'],
    ];
    const rssBefore = process.memoryUsage().rss;
    for (const [what, bomb, encoding] of bombs) {
      const answer = await sendChunked('/api/v2/ingest/batch', bomb, { 'content-encoding': encoding });
      expect(answer.status, what).toBe(413);
      expect(answer.headers['connection']).toBe('close');
      expect(JSON.parse(answer.text)).toMatchObject({ details: [{ loc: ['body'], type: 'too_large' }] });
    }
    // The gateway runs in this process: what it held for the bombs shows in its resident memory.
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(64 * MiB);
    expect((await gw.post('/api/v2/ingest', { ship_id: 'after-bombs', cargo_id: 'c', value: 1 })).status).toBe(200);
  });

  it('inflates a body compressed twice under one coding once, and refuses what is left as not JSON', async () => {
    const twice = gzipSync(gzipSync(Buffer.alloc(16 * MiB)));
    expect(await jsonAnswer(await send('/api/v2/ingest/batch', twice, { 'content-encoding': 'gzip' }))).toMatchObject({
      status: 400,
      body: { details: [{ loc: ['body'], type: 'utf8_invalid' }] },
    });
    expect(await jsonAnswer(await send('/api/v2/ingest/batch', twice, { 'content-encoding': 'gzip, gzip' }))).toMatchObject({
      status: 415,
      body: { details: [{ loc: ['header', 'content-encoding'], type: 'unsupported_encoding' }] },
    });
  });

  it('answers 400 naming the coding to a corrupt stream and 415 naming the codings it takes to an unknown one', async () => {
    const corrupt = await send('/api/v2/ingest', '{"ship_id":"a","cargo_id":"b","value":1}', { 'content-encoding': 'gzip' });
    expect(await jsonAnswer(corrupt)).toMatchObject({
      status: 400,
      body: { message: expect.stringContaining('not a whole gzip stream'), details: [{ loc: ['body'], type: 'encoding_invalid' }] },
    });
    const unknown = await send('/api/v2/ingest', '{}', { 'content-encoding': 'zstd' });
    expect(unknown.headers.get('accept-encoding')).toBe('gzip, deflate, br');
    expect(await jsonAnswer(unknown)).toMatchObject({
      status: 415,
      body: { message: expect.stringContaining('gzip, deflate or br'), details: [{ type: 'unsupported_encoding' }] },
    });
  });

  it('holds MAX_BODY_BYTES of the in-flight budget for a compressed body, whatever its declared length', async () => {
    const small = await startTestGateway({ MAX_INFLIGHT_BYTES: '64KiB', MAX_BODY_BYTES: '64KiB' });
    const slow = connect(Number(new URL(small.url).port), '127.0.0.1');
    try {
      await new Promise<void>((resolve) => slow.once('connect', () => resolve()));
      const head = gzipSync('[{"ship_id":"a","cargo_id":"b","value":1}]').subarray(0, 10);
      slow.write(
        `POST /api/v2/ingest/batch HTTP/1.1\r\nHost: x\r\nX-API-Key: ${TEST_KEY}\r\nContent-Encoding: gzip\r\nContent-Length: 100\r\n\r\n`,
      );
      slow.write(head);
      await new Promise((r) => setTimeout(r, 100));
      // 100 bytes declared, but they may inflate to 64 KiB: the budget has no room for even a small request.
      const busy = await small.post('/api/v2/ingest/batch', [{ ship_id: 'a', cargo_id: 'b', value: 1 }]);
      expect(await jsonAnswer(busy)).toMatchObject({ status: 503, body: { details: [{ type: 'busy' }] } });
    } finally {
      slow.destroy();
    }
    await waitUntil(
      'the in-flight budget given back',
      async () => (await small.post('/api/v2/ingest/batch', [{ ship_id: 'a', cargo_id: 'b', value: 1 }])).status === 200,
    );
    await small.stop();
  });
});

describe('the series form at the batch endpoints', () => {
  const series = {
    time0: '2026-05-27T11:00:00.000000000Z',
    time_unit: 'ms',
    series: [
      { ship_id: 'series-1', cargo_id: 'temp', times: [0, 5000, 5000], values: [12.37, 12.38, 12.36] },
      { ship_id: 'series-1', cargo_id: 'lat', times: [1, 5000], values: [53.546112, 53.546131] },
    ],
  };

  it('stores the readings the series stand for, compressed or not', async () => {
    const answer = await send('/api/v2/ingest/harbor-1/batch', gzipSync(JSON.stringify(series)), {
      'content-type': SERIES_MEDIA_TYPE,
      'content-encoding': 'gzip',
    });
    expect(await jsonAnswer(answer)).toEqual({ status: 200, body: { status: 'Batch data received and queued', count: 5 } });
    expect(await rowsOf('series-1')).toEqual([
      ['temp', 12.37, '2026-05-27T11:00:00.000000000Z'],
      ['lat', 53.546112, '2026-05-27T11:00:00.001000000Z'],
      ['temp', 12.38, '2026-05-27T11:00:05.000000000Z'],
      ['lat', 53.546131, '2026-05-27T11:00:05.001000000Z'],
      ['temp', 12.36, '2026-05-27T11:00:10.000000000Z'],
    ]);
  });

  it('refuses a reading of it at its index in the batch it stands for, series after series', async () => {
    const bad = structuredClone(series);
    bad.series[1]!.values[1] = 'north' as unknown as number;
    const answer = await send('/api/v2/ingest/batch', JSON.stringify(bad), { 'content-type': `${SERIES_MEDIA_TYPE}; charset=utf-8` });
    expect(await jsonAnswer(answer)).toMatchObject({ status: 422, body: { details: [{ loc: ['body', 4, 'value'] }] } });
    // Without its media type, the body is no plain batch.
    expect((await send('/api/v2/ingest/batch', JSON.stringify(series), { 'content-type': 'application/json' })).status).toBe(400);
  });

  it('is offered, with the codings, to a forwarding gateway that does not use them yet, and to nobody else', async () => {
    const reading = JSON.stringify([{ ship_id: 'offer-1', cargo_id: 'c', value: 1 }]);
    const forwarding = await send('/api/v2/ingest/batch', reading, { 'content-type': 'application/json', 'x-harbor-site': 'site-b' });
    expect(forwarding.status).toBe(200);
    expect(forwarding.headers.get('accept-encoding')).toBe('gzip, deflate, br');
    expect(forwarding.headers.get('accept-post')).toBe(`application/json, ${SERIES_MEDIA_TYPE}`);
    const using = await send('/api/v2/ingest/batch', gzipSync(JSON.stringify(series)), {
      'content-type': SERIES_MEDIA_TYPE,
      'content-encoding': 'gzip',
      'x-harbor-site': 'site-b',
    });
    expect(using.status).toBe(200);
    expect(using.headers.get('accept-encoding')).toBeNull();
    expect(using.headers.get('accept-post')).toBeNull();
    const device = await send('/api/v2/ingest/batch', reading, { 'content-type': 'application/json' });
    expect(device.headers.get('accept-encoding')).toBeNull();
    expect(device.headers.get('accept-post')).toBeNull();
  });
});
