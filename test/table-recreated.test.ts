import { afterAll, describe, expect, it } from 'vitest';
import { startQuestDb, type QuestDbServer } from '../scripts/lib/questdb.mjs';
import { startTestGateway } from './support/gateway.js';
import { sql, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

const dataDir = tempDir('recreate-qdb');
let questdb: QuestDbServer | undefined;
afterAll(async () => {
  await questdb?.stop();
});

describe('a table dropped by hand while the gateway runs', () => {
  it('is created again by the flusher, with deduplication, and nothing is dead-lettered', async () => {
    // As the appliance and the compose stack run QuestDB: ILP may not create tables by itself.
    questdb = await startQuestDb({ dataDir, env: { QDB_LINE_AUTO_CREATE_NEW_TABLES: 'false' } });
    const gw = await startTestGateway({ QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: 'dropped', FLUSH_BACKOFF_MAX_MS: '300' });
    try {
      const post = (n: number) => gw.post('/api/v2/ingest/', { time: `2026-03-05T00:00:0${n}Z`, ship_id: 's', cargo_id: 'c', value: n });
      expect((await post(1)).status).toBe(200);
      await waitForDrained(gw);
      await sql('DROP TABLE dropped', questdb.httpUrl);
      expect((await post(2)).status).toBe(200);
      expect((await post(3)).status).toBe(200);
      await waitForDrained(gw);
      // Reading 1 went with the dropped table, and QuestDB acknowledged the first write on each
      // kept-alive connection that had the table open, losing it too. A refused write or the
      // table check (every 5 s) finds the table gone: the gateway creates it and sends what it
      // keeps (REPLAY_WINDOW_MS) again, so the new table has every reading, once.
      expect(await waitForCount(`SELECT count() FROM dropped`, 3, 30_000, questdb.httpUrl)).toBe(3);
      await waitForWalApplied('dropped', 20_000, questdb.httpUrl);
      expect((await sql<[number]>('SELECT value FROM dropped ORDER BY time', questdb.httpUrl)).dataset.map(([v]) => v)).toEqual([1, 2, 3]);
      expect((await sql<[string]>('SHOW CREATE TABLE dropped', questdb.httpUrl)).dataset[0]![0]).toMatch(
        /DEDUP UPSERT KEYS\(time,ship_id,cargo_id,site\)/,
      );
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
    } finally {
      await gw.stop();
    }
  });
});
