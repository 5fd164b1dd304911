import { Hono } from 'hono';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FailureThrottle } from './failure-throttle.js';
import { apiKey } from './index.js';

const app = (key: string, limit = 100) => {
  const hono = new Hono();
  hono.use(
    apiKey({ key, throttle: new FailureThrottle(limit, 60_000), clientAddress: (c) => c.req.header('x-test-address') ?? 'a', logger: pino({ level: 'silent' }) }),
  );
  hono.post('/', (c) => c.text('in'));
  return hono;
};

const status = async (hono: Hono, key: string | undefined, address = 'a') =>
  (await hono.request('/', { method: 'POST', headers: { ...(key === undefined ? {} : { 'x-api-key': key }), 'x-test-address': address } })).status;

describe('apiKey middleware', () => {
  it('lets exactly the configured key through', async () => {
    const hono = app('s3cret-Key_0123');
    expect(await status(hono, 's3cret-Key_0123')).toBe(200);
    for (const wrong of ['s3cret-Key_012', 's3cret-Key_01234', 'S3CRET-KEY_0123', ' s3cret-Key_0123x', 'x'.repeat(10_000), '', undefined]) {
      expect(await status(hono, wrong)).toBe(401);
    }
  });

  it('blocks an address after the limit, even with the right key, and only that address', async () => {
    const hono = app('key', 2);
    expect(await status(hono, 'nope', 'attacker')).toBe(401);
    expect(await status(hono, undefined, 'attacker')).toBe(401);
    expect(await status(hono, 'key', 'attacker')).toBe(429);
    expect(await status(hono, 'key', 'sensor')).toBe(200);
  });
});
