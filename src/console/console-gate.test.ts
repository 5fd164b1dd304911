import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { EMPTY_CATALOGUE } from '../catalogue/catalogue.js';
import { KeyStore } from '../keys/key-store.js';
import { createLogger } from '../log/logger.js';
import { QueueWriter } from '../queue/queue-writer.js';
import { GatewayStats } from '../stats.js';
import { GatewayConsole } from './gateway-console.js';

const dir = mkdtempSync(join(tmpdir(), 'harbor-console-gate-'));
const queue = QueueWriter.open({ dataDir: dir, durability: 'process-crash', maxBytes: 1 << 20 });
afterAll(() => {
  queue.close();
  rmSync(dir, { recursive: true, force: true });
});

function app(metricsToken: string | undefined): Hono {
  const console = new GatewayConsole({
    queue,
    stats: new GatewayStats(),
    keys: new KeyStore({ defaultKey: 'device-key', path: join(dir, 'api-keys'), pollMs: 1000, logger: createLogger('silent') }),
    failureDelay: { total: 0, tracked: 0 },
    isStopping: () => false,
    version: 'test',
    certificate: () => ({ fingerprintSha256: 'AA', source: 'self-signed', subjectAltName: '', notAfter: '', pem: '' }),
    sinks: [],
    delivery: { notifyAppended: () => undefined },
    password: 'console-password',
    metricsToken,
    env: {},
    audit: { record: () => undefined, latest: () => [], counts: () => [] },
    catalogue: { catalogue: EMPTY_CATALOGUE },
    logger: createLogger('silent'),
    listenHost: '0.0.0.0',
    readings: undefined,
  });
  console.httpsPort = 8443;
  const hono = new Hono({ strict: false });
  console.mount(hono);
  return hono;
}

/** A request as @hono/node-server hands it over: the socket tells the peer and whether it is TLS. */
const from = (remoteAddress: string, encrypted = false) => ({ incoming: { socket: { remoteAddress, encrypted } } });

describe('who reaches the console and /metrics', () => {
  it('sends a browser on the LAN from plain HTTP to the HTTPS port, and serves it over TLS', async () => {
    const hono = app(undefined);
    const plain = await hono.request('http://gateway.local:8000/console/devices?x=1', {}, from('192.168.1.7'));
    expect(plain.status).toBe(308);
    expect(plain.headers.get('location')).toBe('https://gateway.local:8443/console/devices?x=1');
    const post = await hono.request('http://gateway.local:8000/console/login', { method: 'POST' }, from('192.168.1.7'));
    expect(post.status).toBe(403);
    const tls = await hono.request('https://gateway.local:8443/console/login', {}, from('192.168.1.7', true));
    expect(tls.status).toBe(200);
    const loopback = await hono.request('http://localhost:8000/console/login', {}, from('::ffff:127.0.0.1'));
    expect(loopback.status).toBe(200);
  });

  it('answers /metrics on loopback, elsewhere only with METRICS_TOKEN; never for a device key', async () => {
    expect((await app(undefined).request('/metrics', {}, from('127.0.0.1'))).status).toBe(200);
    expect((await app(undefined).request('/metrics', {}, from('192.168.1.7'))).status).toBe(403);
    const withToken = app('metrics-token-0123456789');
    expect((await withToken.request('/metrics', {}, from('192.168.1.7'))).status).toBe(401);
    const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
    expect((await withToken.request('/metrics', bearer('device-key'), from('192.168.1.7'))).status).toBe(401);
    expect((await withToken.request('/metrics', { headers: { 'x-api-key': 'device-key' } }, from('192.168.1.7'))).status).toBe(401);
    const scraped = await withToken.request('/metrics', bearer('metrics-token-0123456789'), from('192.168.1.7'));
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toMatch(/^# HELP harbor_gateway_info /);
  });
});

describe('names from the request', () => {
  it('find no asset by a name every object inherits: 404, without a session, without an error', async () => {
    const hono = app(undefined);
    let failed: unknown;
    hono.onError((error, c) => {
      failed = error;
      return c.text('failed', 500);
    });
    for (const name of ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty']) {
      const answer = await hono.request(`https://gateway.local:8443/console/assets/${name}`, {}, from('192.168.1.7', true));
      expect(answer.status, name).toBe(404);
    }
    expect(failed).toBeUndefined();
    expect((await hono.request('https://gateway.local:8443/console/assets/console.css', {}, from('192.168.1.7', true))).status).toBe(200);
  });
});

describe('requests without a session', () => {
  it('are answered 429 with Retry-After at once past their shared rate; loopback is not counted', async () => {
    // The clock stands still, so the bucket refills not at all however slow the machine is.
    vi.useFakeTimers({ toFake: ['Date'] });
    onTestFinished(() => {
      vi.useRealTimers();
    });
    const hono = app('metrics-token-0123456789');
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      const answer = await hono.request('https://gateway.local:8443/console/login', {}, from(`192.0.2.${i}`, true));
      statuses.push(answer.status);
      if (answer.status === 429) expect(answer.headers.get('retry-after')).toBe('1');
    }
    expect(statuses.filter((s) => s === 200).length).toBe(40);
    expect(statuses.at(-1)).toBe(429);
    expect((await hono.request('/metrics', {}, from('192.0.2.1'))).status).toBe(429);
    expect((await hono.request('http://localhost:8000/console/login', {}, from('127.0.0.1'))).status).toBe(200);
    expect((await hono.request('/metrics', {}, from('127.0.0.1'))).status).toBe(200);
    const bearer = { headers: { authorization: 'Bearer metrics-token-0123456789' } };
    expect((await hono.request('/metrics', bearer, from('192.0.2.1'))).status).toBe(200);
  });
});
