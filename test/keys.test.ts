import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { TEST_KEY, jsonAnswer, startTestGateway, type TestGateway } from './support/gateway.js';
import { spawnGateway } from './support/process.js';
import { sql, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

const run = promisify(execFile);

/** The keys command of the built bundle, as an operator runs it. */
const keys = (file: string, ...args: string[]) =>
  run(process.execPath, [inject('bundlePath'), 'keys', ...args, '--file', file], { env: { PATH: process.env['PATH'] ?? '' } });

const addKey = async (file: string, name: string, ...options: string[]): Promise<string> =>
  (await keys(file, 'add', name, ...options)).stdout.trim();

const reading = (ship: string, value: number) => ({ time: '2026-02-04T10:00:00Z', ship_id: ship, cargo_id: 'level', value });

async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('keys command', () => {
  it('adds a key printed once, keeps only its hash, lists and revokes by name', async () => {
    const file = join(tempDir('keys'), 'api-keys');
    const key = await addKey(file, 'buoy-1');
    // 24 random bytes in base64url: 192 bits.
    expect(key).toMatch(/^[A-Za-z0-9_-]{32}$/);
    await addKey(file, 'crane', '--ship-prefix', 'crane-');
    const content = readFileSync(file, 'utf8');
    expect(content).not.toContain(key);
    expect(content).toMatch(/^buoy-1 hmac-sha256\$\S+$/m);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect((await keys(file, 'list')).stdout).toBe('buoy-1\tall ships\ncrane\tships starting with crane-\n');
    await expect(keys(file, 'add', 'buoy-1')).rejects.toMatchObject({ code: 65, stderr: expect.stringMatching(/exists/) });
    await expect(keys(file, 'add', 'default')).rejects.toMatchObject({ code: 64 });
    await expect(keys(file, 'add', 'bad name!')).rejects.toMatchObject({ code: 64 });
    await keys(file, 'revoke', 'buoy-1');
    expect((await keys(file, 'list')).stdout).toBe('crane\tships starting with crane-\n');
    await expect(keys(file, 'revoke', 'buoy-1')).rejects.toMatchObject({ code: 65 });
    // A central gateway's key for one site gateway: it writes as that site only.
    await addKey(file, 'pier-7', '--site', 'Hafen Süd 7');
    expect((await keys(file, 'list')).stdout).toBe('crane\tships starting with crane-\npier-7\tall ships\tsite Hafen Süd 7\n');
    await expect(keys(file, 'add', 'pier-8', '--site', ' ')).rejects.toMatchObject({ code: 64 });
    await expect(keys(file, 'add', 'pier-8', '--ship-prefix', 'site=x')).rejects.toMatchObject({ code: 64 });
  });
});

describe('keys in a running gateway', () => {
  let gw: TestGateway;
  let file: string;
  afterAll(() => gw?.stop());

  it('accepts a key added after start and refuses it once revoked, without a restart; API_KEY keeps working', async () => {
    file = join(tempDir('keys'), 'api-keys');
    gw = await startTestGateway({ API_KEYS_FILE: file, API_KEYS_POLL_MS: '100', AUTH_FAILURE_DELAY_MAX_MS: '200' });
    const key = await addKey(file, 'buoy-1');
    const send = () => gw.post('/api/v2/ingest', reading('buoy-1', 1), { 'x-api-key': key }).then((r) => r.status);
    expect(await until(send, (status) => status === 200, 'the added key to be accepted')).toBe(200);
    expect((await gw.post('/api/v2/ingest', reading('buoy-1', 2))).status).toBe(200);
    await keys(file, 'revoke', 'buoy-1');
    expect(await until(send, (status) => status === 401, 'the revoked key to be refused')).toBe(401);
  });

  it('refuses readings of other ships to a key with a ship prefix with 403, per reading, storing none of the request', async () => {
    const key = await addKey(file, 'crane', '--ship-prefix', 'crane-');
    const post = (path: string, body: unknown) => gw.post(path, body, { 'x-api-key': key });
    await until(
      () => post('/api/v2/ingest', reading('crane-1', 10)).then((r) => r.status),
      (status) => status === 200,
      'the crane key',
    );

    const batch = await jsonAnswer(
      await post('/api/v2/ingest/batch', [reading('crane-1', 11), reading('ship-9', 12), reading('ship-9', 13)]),
    );
    expect(batch).toMatchObject({
      status: 403,
      body: { details: [{ loc: ['body', 1, 'ship_id'], type: 'ship_not_allowed' }, { loc: ['body', 2, 'ship_id'] }] },
    });
    expect(batch.body['message']).toMatch(/crane may only send readings of ships starting with "crane-"/);
    expect(await jsonAnswer(await post('/api/v2/ingest', reading('ship-9', 14)))).toMatchObject({
      status: 403,
      body: { details: [{ loc: ['body', 'ship_id'] }] },
    });
    const gps = await jsonAnswer(
      await post('/api/v2/ingest/gps', [
        { ship_id: 'crane-1', latitude: 1, longitude: 2 },
        { ship_id: 'tug', latitude: 1, longitude: 2 },
      ]),
    );
    expect(gps).toMatchObject({ status: 403, body: { details: [{ loc: ['body', 1, 'ship_id'] }] } });
    expect((gps.body['details'] as unknown[]).length).toBe(1);
    const ttn = await jsonAnswer(
      await post('/api/v2/ingest/ttn', { end_device_ids: { device_id: 'lora-1' }, uplink_message: { decoded_payload: { level: 15 } } }),
    );
    expect(ttn).toMatchObject({ status: 403, body: { details: [{ loc: ['body', 'end_device_ids', 'device_id'] }] } });
    expect((await post('/api/v2/ingest/batch', [reading('crane-2', 16)])).status).toBe(200);

    await waitForDrained(gw);
    await waitForWalApplied(gw.table);
    const stored = (await sql<[number]>(`SELECT value FROM "${gw.table}" WHERE value >= 10 ORDER BY value`)).dataset.map(([v]) => v);
    expect(stored).toEqual([10, 16]);

    const status = await jsonAnswer(await fetch(`${gw.url}/status`, { headers: { 'x-api-key': key } }));
    expect(status.body['keys']).toEqual(
      expect.arrayContaining([
        { name: 'crane', shipPrefix: 'crane-', acceptedRequests: 2, acceptedReadings: 2, refusedRequests: 4, lastSeen: expect.any(String) },
        expect.objectContaining({ name: 'default', acceptedRequests: 1, refusedRequests: 0 }),
      ]),
    );
    expect((status.body['keys'] as { name: string }[]).map((k) => k.name)).not.toContain('buoy-1');
  });
});

describe('per-key health rows', () => {
  it("writes every key's counters to gateway_key_health beside gateway_health", async () => {
    const file = join(tempDir('keys'), 'api-keys');
    const key = await addKey(file, 'mast-7');
    const name = `gw-keys-${process.pid}-${Date.now()}`;
    const gw = await startTestGateway({ API_KEYS_FILE: file, HEALTH_REPORT: 'true', HOUSEKEEPING_CRON: '* * * * * *', GATEWAY_NAME: name });
    try {
      expect((await gw.post('/api/v2/ingest/batch', [reading('mast-7', 1), reading('mast-7', 2)], { 'x-api-key': key })).status).toBe(200);
      expect((await gw.post('/api/v2/ingest/batch', [], { 'x-api-key': key })).status).toBe(400);
      const where = `FROM gateway_key_health WHERE gateway = '${name}' AND key = 'mast-7' AND accepted_readings = 2 AND refused_requests = 1`;
      expect(await waitForCount(`SELECT count() ${where}`, 1, 15_000)).toBeGreaterThanOrEqual(1);
      const [row] = (await sql<[number, string | null]>(`SELECT accepted_requests, last_seen ${where} LIMIT 1`)).dataset;
      expect(row?.[0]).toBe(1);
      expect(row?.[1]).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(
        await waitForCount(`SELECT count() FROM gateway_key_health WHERE gateway = '${name}' AND key = 'default'`, 1, 15_000),
      ).toBeGreaterThanOrEqual(1);
    } finally {
      await gw.stop();
    }
  });
});

describe('a wrong-key neighbour', () => {
  it('never delays or refuses a good key from the same address while its own wrong keys are slowed down', async () => {
    const gw = await startTestGateway({ AUTH_FAILURE_DELAY_MAX_MS: '1000' });
    const flood = 30;
    let settled = 0;
    const wrong = Array.from({ length: flood }, () =>
      gw.post('/api/v2/ingest', reading('nat-1', 1), { 'x-api-key': 'misconfigured-device' }).then(async (r) => {
        await r.arrayBuffer();
        settled += 1;
        return r.status;
      }),
    );
    const status = () =>
      fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } }).then(
        (r) => r.json() as Promise<{ auth: { wrongKeyRequests: number } }>,
      );
    await until(status, (s) => s.auth.wrongKeyRequests === flood, 'the flood to arrive');
    try {
      const good = await Promise.all(Array.from({ length: 20 }, (_, i) => gw.post('/api/v2/ingest', reading('nat-2', 100 + i))));
      expect(good.map((r) => r.status)).toEqual(Array(20).fill(200));
      // The good requests were answered while the neighbour's refusals were still being held back.
      expect(settled).toBeLessThan(flood);
    } finally {
      await gw.stop();
    }
    // Stopping answers the held refusals at once: 401, never 429.
    expect(new Set(await Promise.all(wrong))).toEqual(new Set([401]));
  });

  it('re-reads the key file on SIGHUP', async () => {
    const dir = tempDir('keys');
    const file = join(dir, 'api-keys');
    const gateway = await spawnGateway({
      API_KEY: TEST_KEY,
      API_KEYS_FILE: file,
      API_KEYS_POLL_MS: '600000',
      DATA_DIR: join(dir, 'data'),
      QUESTDB_URL: inject('questdbUrl'),
      HEALTH_REPORT: 'false',
    });
    try {
      const key = await addKey(file, 'late');
      const send = () =>
        fetch(`${gateway.url}/api/v2/ingest`, {
          method: 'POST',
          headers: { 'x-api-key': key },
          body: JSON.stringify(reading('late', 1)),
        }).then((r) => r.status);
      expect(await send()).toBe(401);
      const loaded = () => gateway.logs.filter((line) => line['event'] === 'keys_loaded').length;
      const before = loaded();
      gateway.child.kill('SIGHUP');
      await until(
        async () => loaded(),
        (count) => count > before,
        'the reload',
      );
      expect(await send()).toBe(200);
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  });
});
