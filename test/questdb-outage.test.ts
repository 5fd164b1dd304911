import { afterAll, describe, expect, it } from 'vitest';
import { startDevices } from '../scripts/lib/device-load.mjs';
import { startQuestDb, type QuestDbServer } from '../scripts/lib/questdb.mjs';
import { TEST_KEY, startTestGateway } from './support/gateway.js';
import { sql, storedCounts, waitForDrained } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const dataDir = tempDir('outage-qdb');
let questdb: QuestDbServer | undefined;
afterAll(async () => {
  await questdb?.stop();
});

// The test starts its own QuestDB twice; each start may take up to startQuestDb's 90 s on a busy machine.
const TWO_QUESTDB_STARTS_MS = 200_000;

describe('QuestDB outage during ingestion', () => {
  it(
    'keeps accepting while QuestDB is down and delivers everything once when it is back',
    async () => {
      questdb = await startQuestDb({ dataDir });
      const { httpPort, pgPort } = questdb;
      const gw = await startTestGateway({ QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: 'outage', FLUSH_BACKOFF_MAX_MS: '300' });
      const load = startDevices({ url: gw.url, apiKey: TEST_KEY, date: '2026-05-01', batchSize: 20, pauseMs: 2 });
      const status = async () =>
        (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
          queue: { readings: number };
          flush: { consecutiveFailures: number };
        };

      try {
        await waitUntil('readings flushed under load', () => gw.gateway.stats.flush.delivered > 0);
        await questdb.stop();
        const acceptedWhenDown = load.accepted;
        await waitUntil(
          'flushes failing while devices are still answered 200',
          async () => load.accepted > acceptedWhenDown + 200 && (await status()).flush.consecutiveFailures > 1,
        );
        expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
        expect((await status()).queue.readings).toBeGreaterThan(0);

        questdb = await startQuestDb({ dataDir, httpPort, pgPort });
        const flushedWhenBack = gw.gateway.stats.flush.delivered;
        await waitUntil('readings flushed again under load', () => gw.gateway.stats.flush.delivered > flushedWhenBack);
      } finally {
        await load.stop();
      }
      expect(load.refused).toBe(0);
      await waitForDrained(gw, 30_000);
      await gw.stop();
      expect(await storedCounts('outage', questdb.httpUrl)).toEqual({ rows: load.accepted, distinct: load.accepted });
      const [[min, max]] = (await sql<[number, number]>('SELECT min(value), max(value) FROM outage', questdb.httpUrl)).dataset as [
        [number, number],
      ];
      expect({ min, max }).toEqual({ min: 0, max: load.sent - 1 });
    },
    TWO_QUESTDB_STARTS_MS,
  );
});
