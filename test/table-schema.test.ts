import { describe, expect, inject, it } from 'vitest';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { setUpTable } from '../src/sinks/questdb/table-setup.js';
import { startTestGateway } from './support/gateway.js';
import { sql, storedCounts, uniqueTable, waitForDrained } from './support/questdb-sql.js';

/** Waits until the gateway reports a flush error that matches `pattern`. */
async function waitForFlushError(gw: Awaited<ReturnType<typeof startTestGateway>>, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const message = gw.gateway.stats.flush.lastError?.message;
    if (message !== undefined && pattern.test(message)) return message;
    if (Date.now() > deadline) throw new Error(`no flush error like ${pattern} within ${timeoutMs} ms; last: ${message}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a table that cannot hold readings exactly', () => {
  it.each([
    ['a value column of the wrong type', 'value LONG) TIMESTAMP(time) PARTITION BY DAY WAL', /column value of type LONG; expected DOUBLE/],
    ['a table without WAL', 'value DOUBLE) TIMESTAMP(time) PARTITION BY DAY BYPASS WAL', /is not a WAL table/],
  ])('(%s) stops the flusher; the readings wait in the queue until the table is fixed', async (_, columns, reason) => {
    const table = uniqueTable('schema');
    await sql(`CREATE TABLE "${table}" (time TIMESTAMP, ship_id SYMBOL, cargo_id SYMBOL, ${columns}`);
    const gw = await startTestGateway({ QUESTDB_TABLE: table, FLUSH_BACKOFF_MAX_MS: '300' });
    try {
      const readings = [1, 2].map((n) => ({ time: `2026-03-05T00:00:0${n}Z`, ship_id: 's', cargo_id: 'c', value: n + 0.5 }));
      expect((await gw.post('/api/v2/ingest/batch', readings)).status).toBe(200);
      expect(await waitForFlushError(gw, reason)).toMatch(/^table setup failed/);
      expect(gw.gateway.queue.stats().readings).toBe(2);
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
      expect((await sql<[number]>(`SELECT count() FROM "${table}"`)).dataset[0]![0]).toBe(0);

      // The operator drops the table; the flusher creates it as it should be and delivers.
      await sql(`DROP TABLE "${table}"`);
      await waitForDrained(gw);
      expect(await storedCounts(table)).toEqual({ rows: 2, distinct: 2 });
      expect(gw.gateway.queue.deadLetterCount()).toBe(0);
    } finally {
      await gw.stop();
    }
  });
});

describe('the table check', () => {
  it('asks QuestDB two questions of a table already as needed, and alters nothing', async () => {
    const table = uniqueTable('check');
    const questdb = new QuestDbHttp({ url: inject('questdbUrl'), timeoutMs: 10_000, username: undefined, password: undefined });
    const asked: string[] = [];
    const counting = {
      write: questdb.write.bind(questdb),
      close: questdb.close.bind(questdb),
      reconnect: questdb.reconnect.bind(questdb),
      exec: <T>(statement: string): Promise<T> => {
        asked.push(statement);
        return questdb.exec<T>(statement);
      },
    };
    try {
      const created = await setUpTable(counting, table, 30);
      expect(created).toMatchObject({ created: true, altered: false });
      asked.length = 0;
      const checked = await setUpTable(counting, table, 30);
      // Its WAL state comes with its state: the sink's check asks no third question.
      expect(checked).toEqual({ ...created, created: false, wal: expect.objectContaining({ suspended: false }) });
      expect(asked).toHaveLength(2);
      expect(asked.some((statement) => /ALTER|CREATE/.test(statement))).toBe(false);
    } finally {
      await questdb.close();
    }
  });
});
