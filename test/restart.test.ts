import { describe, expect, it } from 'vitest';
import { freePort } from '../scripts/lib/ports.mjs';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { spawnGateway } from './support/process.js';
import { storedCounts, uniqueTable, waitForDrained } from './support/questdb-sql.js';
import { inject } from 'vitest';
import { tempDir } from './support/temp-dir.js';

const batchOf = (round: number, size: number) =>
  Array.from({ length: size }, (_, i) => ({
    time: `2026-04-01T00:00:${String(round).padStart(2, '0')}.${String(i).padStart(6, '0')}Z`,
    ship_id: 'restart-ship',
    cargo_id: `c${i % 7}`,
    value: round * 1000 + i,
  }));

describe('restart with a non-empty queue', () => {
  it('delivers what was queued before a graceful stop, exactly once', async () => {
    const dataDir = tempDir('restart');
    const table = uniqueTable('restart');
    const offline = await startTestGateway({
      DATA_DIR: dataDir,
      QUESTDB_TABLE: table,
      QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
      SHUTDOWN_TIMEOUT_MS: '500',
    });
    for (let round = 0; round < 20; round++) expect((await offline.post('/api/v2/ingest/batch', batchOf(round, 50))).status).toBe(200);
    await offline.stop();
    expect(offline.gateway.queue.stats().readings).toBe(1000);

    const online = await startTestGateway({ DATA_DIR: dataDir, QUESTDB_TABLE: table });
    try {
      expect(online.gateway.queue.stats().readings).toBe(1000);
      await waitForDrained(online);
      expect(await storedCounts(table)).toEqual({ rows: 1000, distinct: 1000 });
    } finally {
      await online.stop();
    }
  });

  it('delivers what was answered 200 before a kill -9', async () => {
    const dataDir = tempDir('kill');
    const table = uniqueTable('kill');
    const env = { API_KEY: TEST_KEY, DATA_DIR: dataDir, QUESTDB_TABLE: table, DURABILITY: 'process-crash' };
    const doomed = await spawnGateway({ ...env, QUESTDB_URL: `http://127.0.0.1:${await freePort()}` });
    for (let round = 0; round < 10; round++) {
      const response = await fetch(`${doomed.url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': TEST_KEY },
        body: JSON.stringify(batchOf(round, 30)),
      });
      expect(response.status).toBe(200);
    }
    doomed.child.kill('SIGKILL');
    expect((await doomed.exited).signal).toBe('SIGKILL');

    const revived = await spawnGateway({ ...env, QUESTDB_URL: inject('questdbUrl'), FLUSH_INTERVAL_MS: '50' });
    try {
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        const status = (await (await fetch(`${revived.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
          queue: { readings: number };
        };
        if (status.queue.readings === 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(await storedCounts(table)).toEqual({ rows: 300, distinct: 300 });
    } finally {
      revived.child.kill('SIGTERM');
      await revived.exited;
    }
  });
});
