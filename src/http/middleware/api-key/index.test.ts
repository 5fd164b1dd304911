import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { writeKeyFile } from '../../../keys/key-file.js';
import { hashKey } from '../../../keys/key-hash.js';
import { KeyStore } from '../../../keys/key-store.js';
import { FailureDelay } from './failure-delay.js';
import { apiKey, principalOf } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'harbor-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const app = (key: string, fileKeys: { name: string; key: string; shipPrefix?: string }[] = []) => {
  const path = join(dir, `keys-${Math.random()}`);
  writeKeyFile(
    path,
    fileKeys.map(({ name, key: k, shipPrefix }) => ({ name, hash: hashKey(k), ...(shipPrefix === undefined ? {} : { shipPrefix }) })),
  );
  const logger = pino({ level: 'silent' });
  const hono = new Hono();
  hono.use(
    apiKey({
      keys: new KeyStore({ defaultKey: key, path, pollMs: 60_000, logger }),
      delay: new FailureDelay(1, 60_000),
      clientAddress: () => 'a',
      stopping: new AbortController().signal,
      logger,
    }),
  );
  hono.post('/', (c) => c.json(principalOf(c)));
  return hono;
};

const send = (hono: Hono, key: string | undefined) =>
  hono.request('/', { method: 'POST', headers: key === undefined ? {} : { 'x-api-key': key } });

describe('apiKey middleware', () => {
  it('lets exactly the configured key through, as the key named default', async () => {
    const hono = app('s3cret-Key_0123');
    const ok = await send(hono, 's3cret-Key_0123');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ name: 'default' });
    for (const wrong of ['s3cret-Key_012', 's3cret-Key_01234', 'S3CRET-KEY_0123', ' s3cret-Key_0123x', 'x'.repeat(10_000), '', undefined]) {
      expect((await send(hono, wrong)).status).toBe(401);
    }
  });

  it('knows the keys of the key file by name, with their ship prefix', async () => {
    const hono = app('default-key-0123', [
      { name: 'buoy-1', key: 'k1-abcdefghijklmnop' },
      { name: 'crane', key: 'k2-abcdefghijklmnop', shipPrefix: 'crane-' },
    ]);
    expect(await (await send(hono, 'k1-abcdefghijklmnop')).json()).toEqual({ name: 'buoy-1' });
    expect(await (await send(hono, 'k2-abcdefghijklmnop')).json()).toEqual({ name: 'crane', shipPrefix: 'crane-' });
    expect(await (await send(hono, 'k2-abcdefghijklmnop')).json()).toEqual({ name: 'crane', shipPrefix: 'crane-' });
    expect((await send(hono, 'k3-abcdefghijklmnop')).status).toBe(401);
  });

  it('answers a valid key at once after wrong keys from the same address', async () => {
    const hono = app('key-0123456789abcdef');
    for (let i = 0; i < 20; i++) expect((await send(hono, 'guess')).status).toBe(401);
    expect((await send(hono, 'key-0123456789abcdef')).status).toBe(200);
  });
});
