import { afterAll, describe, expect, it } from 'vitest';
import { startQuestDb, type QuestDbServer } from '../scripts/questdb.mjs';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { sql, storedCounts, waitForDrained } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const dataDir = tempDir('outage-qdb');
let questdb: QuestDbServer | undefined;
afterAll(async () => {
  await questdb?.stop();
});

describe('QuestDB outage during ingestion', () => {
  it('keeps accepting while QuestDB is down and delivers everything once when it is back', async () => {
    questdb = await startQuestDb({ dataDir });
    const { httpPort, pgPort } = questdb;
    const gw = await startTestGateway({ QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: 'outage', FLUSH_BACKOFF_MAX_MS: '300' });
    let accepted = 0;
    let refused = 0;
    let sequence = 0;
    let running = true;
    // Four concurrent devices posting batches with unique timestamps until told to stop.
    const device = async (id: number): Promise<void> => {
      while (running) {
        const batch = Array.from({ length: 20 }, () => {
          const n = sequence++;
          return { time: `2026-05-01T00:00:00.${String(n).padStart(9, '0')}Z`, ship_id: `device-${id}`, cargo_id: 'seq', value: n };
        });
        const response = await gw.post('/api/v2/ingest/batch', batch);
        if (response.status === 200) accepted += batch.length;
        else refused += 1;
        await response.arrayBuffer();
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    const load = Promise.all([0, 1, 2, 3].map(device));
    const status = async () =>
      (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
        queue: { readings: number };
        flush: { consecutiveFailures: number };
      };

    try {
      await waitUntil('readings flushed under load', () => gw.gateway.stats.flushedReadings > 0);
      await questdb.stop();
      const acceptedWhenDown = accepted;
      await waitUntil('flushes failing while devices are still answered 200', async () => accepted > acceptedWhenDown + 200 && (await status()).flush.consecutiveFailures > 1);
      expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
      expect((await status()).queue.readings).toBeGreaterThan(0);

      questdb = await startQuestDb({ dataDir, httpPort, pgPort });
      const flushedWhenBack = gw.gateway.stats.flushedReadings;
      await waitUntil('readings flushed again under load', () => gw.gateway.stats.flushedReadings > flushedWhenBack);
    } finally {
      running = false;
      await load;
    }
    expect(refused).toBe(0);
    await waitForDrained(gw, 30_000);
    await gw.stop();
    expect(await storedCounts('outage', questdb.httpUrl)).toEqual({ rows: accepted, distinct: accepted });
    const [[min, max]] = (await sql<[number, number]>('SELECT min(value), max(value) FROM outage', questdb.httpUrl)).dataset as [[number, number]];
    expect({ min, max }).toEqual({ min: 0, max: sequence - 1 });
    // Two QuestDB starts, a stop and a drain: well over the default 30 s on a loaded machine.
  }, 180_000);
});
