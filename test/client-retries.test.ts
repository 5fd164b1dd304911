import { describe, expect, it } from 'vitest';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, spawnGateway } from './support/process.js';
import { sql, waitForCount, waitForWalApplied } from './support/questdb-sql.js';
import { waitUntil } from './support/wait.js';

/**
 * Devices that give up waiting and send the same readings again: readings without a time would be
 * stored once per attempt (each gets its own receive time), so the gateway must not store an
 * attempt nobody waits for any more, and must recognise a repetition the client marks as one.
 */

const post = (url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(`${url}/api/v2/ingest/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY, ...headers },
    body: JSON.stringify(body),
    signal,
  });

const rows = async (table: string, ship: string) =>
  (await sql<[number]>(`SELECT count() FROM "${table}" WHERE ship_id = '${ship}'`)).dataset[0]![0];

describe('a client that retries', () => {
  it('after its own timeout while the gateway stalls: only the attempt it still waits for is stored', async () => {
    const env = gatewayEnv('stall', { FLUSH_INTERVAL_MS: '50' });
    const table = env.QUESTDB_TABLE;
    const gateway = await spawnGateway(env);
    const reading = [{ ship_id: 'stalled', cargo_id: 'temp', value: 21.5 }];
    try {
      // The gateway stops (a long fsync, a swapping board: here SIGSTOP); the device times out
      // after 400 ms and sends again, twice, the last time waiting as long as it takes.
      gateway.child.kill('SIGSTOP');
      for (let attempt = 0; attempt < 2; attempt++) {
        await expect(post(gateway.url, reading, {}, AbortSignal.timeout(400))).rejects.toThrow();
      }
      const last = post(gateway.url, reading);
      await new Promise((resolve) => setTimeout(resolve, 300));
      gateway.child.kill('SIGCONT');
      expect((await last).status).toBe(200);
      // An attempt whose end Node read with the request is dropped by Node itself (its body never
      // completes); the others reach the queue and are dropped before the commit.
      const status = (await (await fetch(`${gateway.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
        totals: { acceptedReadings: number; refusedRequests: number; abandonedRequests: number };
      };
      expect(status.totals).toMatchObject({ acceptedReadings: 1, refusedRequests: 2 });
      await waitUntil(
        'a log line for each abandoned request',
        () => gateway.logs.filter((l) => l['event'] === 'request_abandoned').length === status.totals.abandonedRequests,
      );
      expect(await waitForCount(`SELECT count() FROM "${table}"`, 1)).toBe(1);
      await waitForWalApplied(table);
      expect(await rows(table, 'stalled')).toBe(1);
    } finally {
      gateway.child.kill('SIGCONT');
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  });

  it('with an Idempotency-Key: every repetition gets the first answer, also after a restart, and the readings are stored once', async () => {
    const env = gatewayEnv('idem', { FLUSH_INTERVAL_MS: '50' });
    const table = env.QUESTDB_TABLE;
    const readings = [
      { ship_id: 'keyed', cargo_id: 'latitude', value: 53.5 },
      { ship_id: 'keyed', cargo_id: 'longitude', value: 9.9 },
    ];
    const key = { 'idempotency-key': '"5b4c1a9e-2f0d-4c1e-9a57-0c3f6e8d2b11"' };
    const first = await spawnGateway(env);
    let answers: Response[];
    try {
      answers = [await post(first.url, readings, key), await post(first.url, readings, key)];
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      expect(answers[0]!.headers.get('idempotent-replayed')).toBeNull();
      expect(answers[1]!.headers.get('idempotent-replayed')).toBe('true');
      expect(await answers[1]!.json()).toEqual(await answers[0]!.json());
      // The same key for other readings is a client's mistake, refused rather than guessed at.
      const reused = await post(first.url, [{ ...readings[0], value: 0 }], key);
      expect(reused.status).toBe(422);
      expect(await reused.json()).toMatchObject({ details: [{ loc: ['header', 'Idempotency-Key'], type: 'idempotency_key_reused' }] });
      expect((await post(first.url, readings, { 'idempotency-key': 'x'.repeat(300) })).status).toBe(400);
    } finally {
      first.child.kill('SIGTERM');
      expect((await first.exited).code).toBe(0);
    }
    // An update restarts the gateway while the device still retries.
    const second = await spawnGateway(env);
    try {
      const again = await post(second.url, readings, key);
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      // A new key is a new request, stored again at its own receive time.
      expect((await post(second.url, readings, { 'idempotency-key': 'another' })).status).toBe(200);
      expect(await waitForCount(`SELECT count() FROM "${table}"`, 4)).toBe(4);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await waitForWalApplied(table);
      expect(await rows(table, 'keyed')).toBe(4);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });

  it('with an Idempotency-Key at a centre: the key covers the site, so a batch for another site is not answered as a repetition', async () => {
    const env = gatewayEnv('idem-sites', { FLUSH_INTERVAL_MS: '50', SITE_ID: 'centre' });
    const table = env.QUESTDB_TABLE;
    const readings = [{ ship_id: 'pump-1', cargo_id: 'pressure', value: 4.2 }];
    const key = { 'idempotency-key': 'batch-0001' };
    const site = (name: string) => ({ ...key, 'x-harbor-site': name });
    const first = await spawnGateway(env);
    try {
      expect((await post(first.url, readings, site('pier-x'))).status).toBe(200);
      const other = await post(first.url, readings, site('pier-y'));
      expect(other.status).toBe(422);
      expect(other.headers.get('idempotent-replayed')).toBeNull();
      expect(await other.json()).toMatchObject({ details: [{ loc: ['header', 'Idempotency-Key'], type: 'idempotency_key_reused' }] });
      expect((await post(first.url, readings, { 'idempotency-key': 'batch-0002', 'x-harbor-site': 'pier-y' })).status).toBe(200);
    } finally {
      first.child.kill('SIGTERM');
      expect((await first.exited).code).toBe(0);
    }
    // The saved keys keep their site across a restart.
    const second = await spawnGateway(env);
    try {
      const again = await post(second.url, readings, site('pier-x'));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await post(second.url, readings, site('pier-y'))).status).toBe(422);
      expect(await waitForCount(`SELECT count() FROM "${table}"`, 2)).toBe(2);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await waitForWalApplied(table);
      const stored = await sql<[string]>(`SELECT site FROM "${table}" ORDER BY site`);
      expect(stored.dataset).toEqual([['pier-x'], ['pier-y']]);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });
});
