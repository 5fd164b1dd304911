import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_KEY, jsonAnswer, startTestGateway, type TestGateway } from './support/gateway.js';
import { inject } from 'vitest';
import { freePort } from '../scripts/lib/ports.mjs';
import { FaultProxy } from './support/fault-proxy.js';
import { sql, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { waitUntil } from './support/wait.js';

const reading = { time: '2026-01-31T12:00:00.000Z', ship_id: 'ship-1', cargo_id: 'temperature', value: 21.5 };

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ MAX_BATCH_READINGS: '10', MAX_BODY_BYTES: '4096' });
});
afterAll(() => gw.stop());

describe('ingest paths', () => {
  it.each([
    '/api/v2/ingest',
    '/api/v2/ingest/',
    '/api/v2/ingest/ingest/harbor-1',
    '/api/v2/ingest/harbor-1',
    '/api/v2/ingest/harbor-1/',
    '/api/v1/ingest/ingest/harbor-1',
  ])('single push to %s answers 200 with the ids', async (path) => {
    expect(await jsonAnswer(await gw.post(path, reading))).toEqual({
      status: 200,
      body: { status: 'Data received and queued', ship_id: 'ship-1', cargo_id: 'temperature' },
    });
  });

  it.each([
    '/api/v2/ingest/batch',
    '/api/v2/ingest/batch/',
    '/api/v2/ingest/ingest/harbor-1/batch',
    '/api/v2/ingest/harbor-1/batch',
    '/api/v1/ingest/ingest/harbor-1/batch',
    '/api/v1/ingest/ingest/harbor-1/batch/',
  ])('batch push to %s answers 200 with the count', async (path) => {
    expect(await jsonAnswer(await gw.post(path, [reading, { ...reading, cargo_id: 'humidity' }]))).toEqual({
      status: 200,
      body: { status: 'Batch data received and queued', count: 2 },
    });
  });

  it('never takes batch, ingest, ttn or gps as a harbor id', async () => {
    expect((await gw.post('/api/v2/ingest/gps/batch', [reading])).status).toBe(404);
    expect((await gw.post('/api/v2/ingest/ingest', reading)).status).toBe(404);
    expect((await gw.post('/api/v2/ingest/ingest/ingest', reading)).status).toBe(404);
    expect((await gw.post('/api/v2/ingest/ttn/batch', [reading])).status).toBe(404);
  });

  it('accepts The Things Network uplinks at /api/v2/ingest/ttn', async () => {
    const uplink = {
      end_device_ids: { device_id: 'lora-7' },
      uplink_message: {
        received_at: '2026-01-31T12:00:00.123456789Z',
        decoded_payload: { temperature: 21.5, label: 'x', battery: 3.3 },
        rx_metadata: [{ rssi: -42, channel_rssi: -43, snr: 9.5 }],
        settings: { data_rate: { lora: { bandwidth: 125000, spreading_factor: 7 } }, frequency: '868100000' },
      },
    };
    expect(await jsonAnswer(await gw.post('/api/v2/ingest/ttn', uplink))).toEqual({
      status: 200,
      body: { status: 'Uplink received and queued', count: 8 },
    });
    const empty = await jsonAnswer(await gw.post('/api/v2/ingest/ttn', { end_device_ids: { device_id: 'd' }, uplink_message: {} }));
    expect(empty).toEqual({ status: 200, body: { status: 'No numeric data extracted', count: 0 } });
    expect((await jsonAnswer(await gw.post('/api/v2/ingest/ttn', { hello: 1 }))).status).toBe(422);
  });
});

describe('harbor id', () => {
  it('when configured, only that id is accepted', async () => {
    const only = await startTestGateway({ HARBOR_ID: 'harbor-1' });
    try {
      expect((await only.post('/api/v2/ingest/ingest/harbor-1', reading)).status).toBe(200);
      const other = await jsonAnswer(await only.post('/api/v2/ingest/ingest/harbor-2/batch', [reading]));
      expect(other.status).toBe(404);
      expect(other.body).toMatchObject({ message: 'Unknown harbor', details: [{ loc: ['path', 'harbor_id'] }] });
      expect((await only.post('/api/v2/ingest/batch', [reading])).status).toBe(200);
    } finally {
      await only.stop();
    }
  });
});

describe('authentication', () => {
  it('answers 401 saying whether the key is missing or wrong', async () => {
    const missing = await jsonAnswer(await gw.post('/api/v2/ingest/', reading, { 'x-api-key': '' }));
    expect(missing).toMatchObject({
      status: 401,
      body: { message: 'Missing X-API-Key header', details: [{ loc: ['header', 'x-api-key'], type: 'missing' }] },
    });
    const wrong = await jsonAnswer(await gw.post('/api/v2/ingest/', reading, { 'x-api-key': 'nope' }));
    expect(wrong).toMatchObject({ status: 401, body: { message: 'Invalid API key' } });
    expect(JSON.stringify(wrong.body)).not.toContain(TEST_KEY);
  });
});

describe('refusals', () => {
  it.each([
    ['{"ship_id": ', 'json_invalid'],
    ['', 'json_invalid'],
    ['\ufeff{}', 'json_invalid'],
  ])('answers 400 for the unparseable body %j', async (body, type) => {
    const response = await jsonAnswer(await gw.post('/api/v2/ingest', body));
    expect(response).toMatchObject({ status: 400, body: { message: 'Body is not valid JSON', details: [{ loc: ['body'], type }] } });
  });

  it('answers 400 for invalid UTF-8', async () => {
    const response = await fetch(`${gw.url}/api/v2/ingest`, {
      method: 'POST',
      headers: { 'x-api-key': TEST_KEY },
      body: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    });
    expect(await jsonAnswer(response)).toMatchObject({ status: 400, body: { details: [{ type: 'utf8_invalid' }] } });
  });

  it('answers 400 for the wrong top-level shape, an empty batch and too many readings', async () => {
    expect((await jsonAnswer(await gw.post('/api/v2/ingest', [reading]))).status).toBe(400);
    expect((await jsonAnswer(await gw.post('/api/v2/ingest/batch', reading))).status).toBe(400);
    expect(await jsonAnswer(await gw.post('/api/v2/ingest/batch', []))).toMatchObject({ status: 400, body: { message: 'Batch is empty' } });
    const many = await jsonAnswer(await gw.post('/api/v2/ingest/batch', new Array(11).fill(reading)));
    expect(many).toMatchObject({ status: 400, body: { details: [{ type: 'too_long' }] } });
  });

  it('answers 422 with one detail per problem, naming batch index and field', async () => {
    const response = await jsonAnswer(
      await gw.post('/api/v2/ingest/batch', [reading, { ...reading, value: 'hot' }, { ...reading, ship_id: '', time: 'noon' }]),
    );
    expect(response.status).toBe(422);
    expect(response.body['details']).toEqual([
      { loc: ['body', 1, 'value'], msg: 'Input should be a number, not string', type: 'number_type' },
      { loc: ['body', 2, 'time'], msg: expect.stringContaining('RFC 3339'), type: 'datetime_format' },
      { loc: ['body', 2, 'ship_id'], msg: 'String should have at least 1 character', type: 'string_too_short' },
    ]);
  });

  it('answers 413 for a body over the limit, declared or chunked, before reading it whole', async () => {
    const large = JSON.stringify(new Array(100).fill(reading));
    expect(large.length).toBeGreaterThan(4096);
    expect(await jsonAnswer(await gw.post('/api/v2/ingest/batch', large))).toMatchObject({
      status: 413,
      body: { details: [{ type: 'too_large' }] },
    });
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        `${gw.url}/api/v2/ingest/batch`,
        { method: 'POST', headers: { 'x-api-key': TEST_KEY, 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.write(large.slice(0, 3000));
      req.write(large.slice(3000));
      req.end();
    });
    expect(chunked).toBe(413);
  });

  it('answers 415 naming the codings it takes for a coding it does not', async () => {
    const response = await gw.post('/api/v2/ingest', reading, { 'content-encoding': 'zstd' });
    expect(response.status).toBe(415);
    expect(response.headers.get('accept-encoding')).toBe('gzip, deflate, br');
  });

  it('is lenient about Content-Type but not about the body', async () => {
    for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'application/octet-stream']) {
      expect((await gw.post('/api/v2/ingest/', reading, { 'content-type': type })).status).toBe(200);
    }
    expect((await gw.post('/api/v2/ingest/', 'ship_id=a&value=1', { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(
      400,
    );
  });

  it('answers 404 for unknown paths and 405 with Allow for wrong methods', async () => {
    expect(await jsonAnswer(await gw.post('/api/v3/ingest', reading))).toMatchObject({
      status: 404,
      body: { details: [{ type: 'not_found' }] },
    });
    const get = await fetch(`${gw.url}/api/v2/ingest/batch`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    const post = await fetch(`${gw.url}/healthz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('queue bound', () => {
  it('answers 503 with Retry-After when the queue is full, keeps what it queued and recovers by itself', async () => {
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    proxy.set('refuse');
    const full = await startTestGateway({ QUESTDB_URL: proxy.url, QUEUE_MAX_BYTES: '1MiB', MAX_BODY_BYTES: '1MiB' });
    try {
      const batch = (round: number) =>
        Array.from({ length: 1000 }, (_, i) => ({
          ...reading,
          time: `2026-02-01T00:${String(round).padStart(2, '0')}:00.${String(i).padStart(3, '0')}Z`,
          cargo_id: `c${i % 10}`.padEnd(90, 'x'),
        }));
      let accepted = 0;
      let refused: Response | undefined;
      for (let round = 0; refused === undefined; round++) {
        const response = await full.post('/api/v2/ingest/batch', batch(round));
        if (response.status === 200) accepted += 1000;
        else refused = response;
      }
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('30');
      expect(await refused.json()).toMatchObject({ details: [{ loc: ['queue'], type: 'queue_full' }] });
      expect(full.gateway.queue.stats().readings).toBe(accepted);
      expect((await fetch(`${full.url}/readyz`)).status).toBe(503);

      proxy.set('pass');
      await waitForDrained(full);
      expect((await fetch(`${full.url}/readyz`)).status).toBe(200);
      expect((await full.post('/api/v2/ingest/batch', batch(59))).status).toBe(200);
      await waitForDrained(full);
      await waitForWalApplied(full.table);
      expect((await sql<[number]>(`SELECT count() FROM "${full.table}"`)).dataset[0]![0]).toBe(accepted + 1000);
    } finally {
      await full.stop();
      await proxy.close();
    }
  });
});

describe('in-flight budget', () => {
  it('answers 503 busy to a request that would exceed the bytes held in memory, before reading it', async () => {
    const small = await startTestGateway({ MAX_INFLIGHT_BYTES: '64KiB', MAX_BODY_BYTES: '64KiB' });
    const { connect } = await import('node:net');
    const port = Number(new URL(small.url).port);
    const slow = connect(port, '127.0.0.1');
    try {
      await new Promise<void>((resolve) => slow.once('connect', () => resolve()));
      slow.write(`POST /api/v2/ingest/batch HTTP/1.1\r\nHost: x\r\nX-API-Key: ${TEST_KEY}\r\nContent-Length: 60000\r\n\r\n[`);
      await new Promise((r) => setTimeout(r, 100));
      const busy = await small.post('/api/v2/ingest/batch', JSON.stringify(new Array(100).fill(reading)));
      expect(busy.status).toBe(503);
      expect(busy.headers.get('retry-after')).toBe('1');
      expect(await busy.json()).toMatchObject({ details: [{ type: 'busy' }] });
    } finally {
      slow.destroy();
    }
    // The budget is given back once the server notices the connection is gone.
    await waitUntil('the in-flight budget given back', async () => (await small.post('/api/v2/ingest/batch', [reading])).status === 200);
    await small.stop();
  });
});

describe('health and status', () => {
  it('reports alive and ready, and status only with the key', async () => {
    expect(await jsonAnswer(await fetch(`${gw.url}/healthz`))).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await jsonAnswer(await fetch(`${gw.url}/readyz`))).toEqual({ status: 200, body: { status: 'ready' } });
    expect((await fetch(`${gw.url}/status`)).status).toBe(401);
    const status = await jsonAnswer(await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } }));
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      durability: 'process-crash',
      queue: { readings: expect.any(Number), maxBytes: expect.any(Number) },
      deadLetters: 0,
      totals: { acceptedRequests: expect.any(Number) },
      memory: { rssBytes: expect.any(Number), heapUsedBytes: expect.any(Number) },
    });
    expect(JSON.stringify(status.body)).not.toContain(TEST_KEY);
  });

  it("reports the delivery thread's heap beside the HTTP thread's", async () => {
    await waitUntil('the delivery thread reports its heap', () => gw.gateway.stats.deliveryHeap !== undefined);
    const { body } = await jsonAnswer(await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } }));
    const memory = (body as { memory: Record<string, number> }).memory;
    expect(memory['heapUsedBytes']).toBeLessThanOrEqual(memory['heapTotalBytes']!);
    expect(memory['deliveryHeapUsedBytes']).toBeGreaterThan(0);
    expect(memory['deliveryHeapUsedBytes']).toBeLessThanOrEqual(memory['deliveryHeapTotalBytes']!);
    // A separate isolate: its heap is not the HTTP thread's figure reported again.
    expect(memory['deliveryHeapTotalBytes']).not.toBe(memory['heapTotalBytes']);
  });

  it('stays ready while QuestDB is unreachable: it buffers', async () => {
    const buffering = await startTestGateway({ QUESTDB_URL: `http://127.0.0.1:${await freePort()}` });
    try {
      expect((await buffering.post('/api/v2/ingest', reading)).status).toBe(200);
      await waitUntil('a failed flush', () => buffering.gateway.stats.flush.lastError !== undefined);
      expect((await fetch(`${buffering.url}/readyz`)).status).toBe(200);
      const status = await jsonAnswer(await fetch(`${buffering.url}/status`, { headers: { 'x-api-key': TEST_KEY } }));
      expect(status.body).toMatchObject({ queue: { readings: 1 }, flush: { consecutiveFailures: expect.any(Number) } });
      expect((status.body['flush'] as { lastError: unknown }).lastError).not.toBeNull();
      expect((status.body['queue'] as { oldestAgeSeconds: number }).oldestAgeSeconds).toBeGreaterThanOrEqual(0);
    } finally {
      await buffering.stop();
    }
  });
});
