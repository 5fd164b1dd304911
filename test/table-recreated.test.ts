import { afterAll, describe, expect, it } from 'vitest';
import { QUESTDB_GUARANTEE_SETTINGS, startQuestDb, type QuestDbServer } from '../scripts/lib/questdb.mjs';
import { startTestGateway } from './support/gateway.js';
import { sql, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const servers: QuestDbServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

const post = (gw: Awaited<ReturnType<typeof startTestGateway>>, n: number) =>
  gw.post('/api/v2/ingest/', { time: `2026-03-05T00:00:0${n}Z`, ship_id: 's', cargo_id: 'c', value: n });

const values = async (table: string, url: string) =>
  (await sql<[number]>(`SELECT value FROM ${table} ORDER BY time`, url)).dataset.map(([v]) => v);
const createStatement = async (table: string, url: string) => (await sql<[string]>(`SHOW CREATE TABLE ${table}`, url)).dataset[0]![0];

// Each test has a QuestDB, a gateway and a table of its own and spends most of its time waiting for
// the sink's table checks, 5 s apart: they run side by side.
describe.concurrent('a table dropped by hand while the gateway runs', () => {
  it('is created again by the flusher, with deduplication, and nothing is dead-lettered', async () => {
    // As every QuestDB the project starts runs: ILP may not create tables by itself.
    const questdb = await startQuestDb({ dataDir: tempDir('recreate-qdb') });
    servers.push(questdb);
    const gw = await startTestGateway({ QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: 'dropped', FLUSH_BACKOFF_MAX_MS: '300' });
    try {
      expect((await post(gw, 1)).status).toBe(200);
      await waitForDrained(gw);
      await sql('DROP TABLE dropped', questdb.httpUrl);
      expect((await post(gw, 2)).status).toBe(200);
      expect((await post(gw, 3)).status).toBe(200);
      await waitForDrained(gw);
      // Reading 1 went with the dropped table, and QuestDB acknowledged the first write on each
      // kept-alive connection that had the table open, losing it too. A refused write or the
      // table check (every 5 s) finds the table gone: the gateway creates it and sends what it
      // keeps (REPLAY_WINDOW_MS) again, so the new table has every reading, once.
      expect(await waitForCount(`SELECT count() FROM dropped`, 3, 30_000, questdb.httpUrl)).toBe(3);
      await waitForWalApplied('dropped', 20_000, questdb.httpUrl);
      expect(await values('dropped', questdb.httpUrl)).toEqual([1, 2, 3]);
      expect(await createStatement('dropped', questdb.httpUrl)).toMatch(/DEDUP UPSERT KEYS\(time,ship_id,cargo_id,site\)/);
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
    } finally {
      await gw.stop();
    }
  });

  it('with QuestDB creating tables over ILP: the table ILP made is refused, the sink stops and says so, and delivers everything once it is dropped', async () => {
    // A QuestDB not run as the project runs it: the next ILP write creates the dropped table with
    // `timestamp` for `time`, no deduplication and no TTL.
    const autoCreate = Object.fromEntries(Object.keys(QUESTDB_GUARANTEE_SETTINGS).map((name) => [name, 'true']));
    const questdb = await startQuestDb({ dataDir: tempDir('autocreate-qdb'), env: autoCreate });
    servers.push(questdb);
    const gw = await startTestGateway({
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: 'autocreated',
      FLUSH_BACKOFF_MAX_MS: '300',
      RETENTION_DAYS: '3650',
    });
    try {
      expect((await post(gw, 1)).status).toBe(200);
      await waitForDrained(gw);
      await sql('DROP TABLE autocreated', questdb.httpUrl);
      // The next ILP write makes the table again. The gateway's own next write goes on a connection
      // that had the dropped table open, where QuestDB acknowledges it and loses it, or on a new one,
      // where it makes the table: which, depends on the connections kept alive. So another client's
      // write makes it here.
      const write = await fetch(`${questdb.httpUrl}/write`, {
        method: 'POST',
        body: 'autocreated,ship_id=x,cargo_id=c value=9 1772668800000000000\n',
      });
      expect(write.status).toBe(204);
      expect((await post(gw, 2)).status).toBe(200);
      // The table check (every 5 s) finds a table it did not set up, which cannot hold readings exactly.
      await waitUntil(
        'the sink reports the table',
        () => /table autocreated is not the table the gateway set up/.test(gw.gateway.stats.flush.lastError?.message ?? ''),
        20_000,
      );
      expect(gw.gateway.stats.flush.lastError?.message).toMatch(/no column time/);
      expect((await post(gw, 3)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1000));
      expect(gw.gateway.queue.stats().readings).toBeGreaterThanOrEqual(1);

      // The operator drops the table ILP made; the gateway creates its own and sends what it kept.
      await sql('DROP TABLE autocreated', questdb.httpUrl);
      await waitForDrained(gw);
      await waitUntil('every reading in the new table', async () => {
        await waitForWalApplied('autocreated', 20_000, questdb.httpUrl);
        return (await values('autocreated', questdb.httpUrl)).length === 3;
      });
      expect(await values('autocreated', questdb.httpUrl)).toEqual([1, 2, 3]);
      const created = await createStatement('autocreated', questdb.httpUrl);
      expect(created).toMatch(/timestamp\(time\)/);
      expect(created).toMatch(/TTL 3650 DAYS/);
      expect(created).toMatch(/DEDUP UPSERT KEYS\(time,ship_id,cargo_id,site\)/);
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
    } finally {
      await gw.stop();
    }
  });
});
