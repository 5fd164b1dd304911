import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/log/logger.js';
import type { QueueRecord } from '../src/queue/queue-reader.js';
import { HttpProxy } from './support/http-proxy.js';
import { UpstreamTarget, type UpstreamTargetOptions } from '../src/sinks/upstream/upstream-target.js';

// Answers a gateway cannot be made to give (429, redirects, stalls, other 4xx) come from a
// node:http destination; the gateway as destination is tested in test/fleet-upstream.test.ts.

interface Received {
  headers: IncomingMessage['headers'];
  readings: { time: string; ship_id: string; cargo_id: string; value: number }[];
}

type Handler = (received: Received, res: ServerResponse) => void;

const servers: Server[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A destination whose answers `handler` decides; `received` lists every request's readings. */
async function destination(handler: Handler): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const part of req) body += part;
    const r = { headers: req.headers, readings: JSON.parse(body) };
    received.push(r);
    handler(r, res);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v2/ingest/batch`, received };
}

function target(url: string, options: Partial<UpstreamTargetOptions> = {}): UpstreamTarget {
  const t = new UpstreamTarget(
    {
      url,
      apiKey: 'upstream-key',
      caFile: undefined,
      proxy: undefined,
      timeoutMs: 5000,
      maxReadings: 1000,
      maxBodyBytes: 1 << 20,
      site: 'site-a',
      ...options,
    },
    createLogger('silent'),
  );
  closers.push(() => t.close());
  return t;
}

/** Records of `perRecord` readings each, values 0, 1, 2, … in queue order. */
function records(count: number, perRecord = 1): QueueRecord[] {
  return Array.from({ length: count }, (_, id) => {
    const payload = Array.from({ length: perRecord }, (_, i) => {
      const n = id * perRecord + i;
      return `${1_764_000_000_000_000_000n + BigInt(n)}\tship-${n % 3}\tcargo\t${n}`;
    }).join('\n');
    return { segment: 1, id: id + 1, receivedMs: 1000 + id, readings: perRecord, bytes: payload.length, payload };
  });
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

describe('UpstreamTarget', () => {
  it('posts the batch in queue order with the key, nanosecond times and every value', async () => {
    const dest = await destination((_, res) => json(res, 200, { status: 'Batch data received and queued' }));
    const delivery = await target(dest.url).deliver(records(3, 2));
    expect(delivery).toEqual({ ok: true, requests: 1, deadLetters: [] });
    const [request] = dest.received;
    expect(request!.headers['x-api-key']).toBe('upstream-key');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.readings.map((r) => r.value)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(request!.readings[1]).toEqual({ time: '2025-11-24T16:00:00.000000001Z', ship_id: 'ship-1', cargo_id: 'cargo', value: 1 });
  });

  it('splits a batch into requests within the reading bound, in order', async () => {
    const dest = await destination((_, res) => json(res, 202, {}));
    const delivery = await target(dest.url, { maxReadings: 4 }).deliver(records(10));
    expect(delivery).toMatchObject({ ok: true, requests: 3 });
    expect(dest.received.map((r) => r.readings.length)).toEqual([4, 4, 2]);
    expect(dest.received.flatMap((r) => r.readings.map((x) => x.value))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('honours 429 and 503 with Retry-After, in seconds or as a date', async () => {
    const inSeconds = await destination((_, res) => json(res, 429, { message: 'slow down' }, { 'retry-after': '12' }));
    expect(await target(inSeconds.url).deliver(records(2))).toEqual({
      ok: false,
      message: 'upstream answered 429: {"message":"slow down"}',
      retryAfterMs: 12_000,
      level: 'warn',
    });
    const asDate = await destination((_, res) => json(res, 503, {}, { 'retry-after': new Date(Date.now() + 120_000).toUTCString() }));
    const delivery = await target(asDate.url).deliver(records(2));
    expect(delivery.ok).toBe(false);
    expect((delivery as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(60_000);
  });

  it('retries a 5xx, a refused connection and a destination that never answers, as passing', async () => {
    const failing = await destination((_, res) => json(res, 500, { message: 'boom' }));
    expect(await target(failing.url).deliver(records(1))).toMatchObject({ ok: false, level: 'warn', message: /500/ });

    const closed = await destination(() => undefined);
    const closedUrl = closed.url;
    const server = servers.pop()!;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    expect(await target(closedUrl).deliver(records(1))).toMatchObject({ ok: false, level: 'warn', message: /unreachable.*ECONNREFUSED/ });

    const silent = await destination(() => undefined);
    expect(await target(silent.url, { timeoutMs: 300 }).deliver(records(1))).toEqual({
      ok: false,
      level: 'warn',
      message: 'upstream did not answer within 300 ms',
    });
  });

  it('makes a refused key an error for the operator, with nothing dead-lettered', async () => {
    const dest = await destination((_, res) => json(res, 401, { message: 'Invalid API key' }));
    expect(await target(dest.url).deliver(records(5))).toMatchObject({ ok: false, level: 'error', message: /401/ });
  });

  it('does not follow a redirect: the URL is to be fixed', async () => {
    const dest = await destination((_, res) => {
      res.writeHead(308, { location: 'https://moved.example/api/v2/ingest/batch' });
      res.end();
    });
    expect(await target(dest.url).deliver(records(1))).toMatchObject({ ok: false, level: 'error', message: /moved\.example/ });
    expect(dest.received).toHaveLength(1);
  });

  it("dead-letters a batch refused with another 4xx, with the status and the answer's message", async () => {
    const dest = await destination((_, res) => json(res, 409, { message: 'conflict' }));
    const delivery = await target(dest.url).deliver(records(2));
    expect(delivery).toEqual({
      ok: true,
      requests: 1,
      deadLetters: [
        { receivedMs: 1000, reason: 'upstream answered 409: conflict', line: '1764000000000000000\tship-0\tcargo\t0' },
        { receivedMs: 1001, reason: 'upstream answered 409: conflict', line: '1764000000000000001\tship-1\tcargo\t1' },
      ],
    });
  });

  it('reads at most a bounded part of a huge answer body', async () => {
    const dest = await destination((_, res) => {
      res.writeHead(409);
      res.end('x'.repeat(8 * 1024 * 1024));
    });
    const delivery = await target(dest.url).deliver(records(1));
    expect(delivery.ok && delivery.deadLetters[0]!.reason.length).toBeLessThan(1100);
  });

  it('halves on 413 until the destination takes the readings, and starts later batches at that size', async () => {
    const dest = await destination((r, res) => (r.readings.length > 3 ? json(res, 413, { message: 'too large' }) : json(res, 200, {})));
    const t = target(dest.url);
    expect(await t.deliver(records(10))).toMatchObject({ ok: true, deadLetters: [] });
    const taken = dest.received.filter((r) => r.readings.length <= 3);
    expect(taken.flatMap((r) => r.readings.map((x) => x.value))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const before = dest.received.length;
    expect(await t.deliver(records(6))).toMatchObject({ ok: true, requests: 2 });
    expect(dest.received.slice(before).map((r) => r.readings.length)).toEqual([3, 3]);
  });

  it('dead-letters a single reading still too large', async () => {
    const dest = await destination((_, res) => json(res, 413, { message: 'too large' }));
    const delivery = await target(dest.url).deliver(records(2));
    expect(delivery).toMatchObject({ ok: true, deadLetters: [{ reason: /413/ }, { reason: /413/ }] });
  });

  it('dead-letters the readings a 422 names and sends the rest again', async () => {
    const dest = await destination((r, res) => {
      const bad = r.readings.flatMap((x, i) => (x.value % 4 === 1 ? [{ loc: ['body', i, 'value'], msg: 'no', type: 'x' }] : []));
      if (bad.length > 0) json(res, 422, { message: 'invalid', details: bad });
      else json(res, 200, {});
    });
    const delivery = await target(dest.url).deliver(records(8));
    expect(delivery.ok).toBe(true);
    expect(delivery.ok && delivery.deadLetters.map((d) => d.line.split('\t')[3])).toEqual(['1', '5']);
    // Each reading's own detail, not the whole answer: one cause reads the same in every batch.
    expect(delivery.ok && delivery.deadLetters.map((d) => d.reason)).toEqual([
      'upstream answered 422: value: no',
      'upstream answered 422: value: no',
    ]);
    expect(dest.received.at(-1)!.readings.map((x) => x.value)).toEqual([0, 2, 3, 4, 6, 7]);
  });

  it('reaches an http:// destination through the HTTP proxy', async () => {
    const proxy = await HttpProxy.start();
    closers.push(() => proxy.close());
    const dest = await destination((_, res) => json(res, 200, {}));
    const t = target(dest.url, { proxy: proxy.url });
    expect(t.describe).toBe(`${dest.url} via proxy ${proxy.url}`);
    expect(await t.deliver(records(2))).toMatchObject({ ok: true });
    expect(proxy.forwarded).toBe(1);
    expect(dest.received[0]!.headers['x-api-key']).toBe('upstream-key');
  });

  it("fails deliveries, as the operator's to fix, while the CA file cannot be read", async () => {
    const dest = await destination((_, res) => json(res, 200, {}));
    expect(await target(dest.url, { caFile: '/nonexistent/upstream-ca.pem' }).deliver(records(1))).toMatchObject({
      ok: false,
      level: 'error',
      message: /cannot set up the upstream connection: .*ENOENT.*upstream-ca\.pem/,
    });
    expect(dest.received).toHaveLength(0);
  });
});
