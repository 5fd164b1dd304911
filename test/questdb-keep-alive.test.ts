import { afterAll, describe, expect, inject, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { FaultProxy } from './support/fault-proxy.js';
import { sql, storedCounts, uniqueTable, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

// The QuestDB sink writes on kept-alive connections. QuestDB acknowledges the first write on a
// connection that had a table open after the table was dropped, and loses those rows; the sink
// keeps what it delivered for REPLAY_WINDOW_MS and checks the table's identity 5 s after a delivery,
// so such a write is sent again, whether the table is still missing or was made anew by hand meanwhile.

const started: { stop(): Promise<void> }[] = [];
afterAll(async () => {
  for (const s of started.reverse()) await s.stop();
});

const batch = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    time: `2026-03-07T00:00:${String(from + i).padStart(2, '0')}Z`,
    ship_id: 's',
    cargo_id: 'c',
    value: from + i,
  }));

// Each test has a proxy, a gateway and a table of its own and spends most of its time waiting for
// the sink's checks, 5 s apart: they run side by side.
describe.concurrent('QuestDB writes on kept-alive connections', () => {
  it('drains a backlog in many writes over a few connections', async () => {
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    started.push({ stop: () => proxy.close() });
    const gw = await startTestGateway({ QUESTDB_URL: proxy.url, FLUSH_BATCH_READINGS: '100', FLUSH_INTERVAL_MS: '20' });
    started.push(gw);
    for (let i = 0; i < 50; i++) {
      const readings = Array.from({ length: 100 }, (_, j) => ({
        time: `2026-03-07T01:00:00.${String(i * 100 + j).padStart(6, '0')}Z`,
        ship_id: 'k',
        cargo_id: 'c',
        value: i * 100 + j,
      }));
      expect((await gw.post('/api/v2/ingest/batch', readings)).status).toBe(200);
    }
    await waitForDrained(gw);
    await waitForWalApplied(gw.table);
    expect(await storedCounts(gw.table)).toEqual({ rows: 5000, distinct: 5000 });
    expect(gw.gateway.stats.sink('questdb').deliveries).toBeGreaterThanOrEqual(50);
    // One connection for the writes and one for SQL (table setup, the checks after deliveries), opened once.
    expect(proxy.accepted).toBeLessThanOrEqual(3);
  });

  it('checks the table every 5 s on the connections it has, though QuestDB hints at closing them after 5 s', async () => {
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    started.push({ stop: () => proxy.close() });
    const gw = await startTestGateway({ QUESTDB_URL: proxy.url });
    started.push(gw);
    expect((await gw.post('/api/v2/ingest/batch', batch(0, 5))).status).toBe(200);
    await waitForDrained(gw);
    const opened = proxy.accepted;
    const asked = proxy.sqlRequests;
    // A reading a second for 11 s: a delivery since each check, so two more checks of the table.
    for (let i = 0; i < 11; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect((await gw.post('/api/v2/ingest/batch', batch(5 + i, 1))).status).toBe(200);
    }
    expect(gw.gateway.stats.sink('questdb').failures).toBe(0);
    // Two questions a check.
    expect(proxy.sqlRequests - asked).toBeGreaterThanOrEqual(4);
    expect(proxy.accepted).toBe(opened);
  });

  it('asks nothing more of QuestDB while nothing new is delivered, until the kept readings may go', async () => {
    const proxy = await FaultProxy.start(inject('questdbUrl'));
    started.push({ stop: () => proxy.close() });
    const gw = await startTestGateway({ QUESTDB_URL: proxy.url, REPLAY_WINDOW_MS: '15000' });
    started.push(gw);
    expect((await gw.post('/api/v2/ingest/batch', batch(0, 5))).status).toBe(200);
    await waitForDrained(gw);
    const delivered = Date.now();
    // The check 5 s after the delivery, then none until the window lets the readings go.
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    const asked = proxy.sqlRequests;
    await new Promise((resolve) => setTimeout(resolve, delivered + 13_000 - Date.now()));
    expect(proxy.sqlRequests).toBe(asked);
    await new Promise((resolve) => setTimeout(resolve, delivered + 18_000 - Date.now()));
    expect(proxy.sqlRequests).toBeGreaterThan(asked);
    expect(gw.gateway.stats.sink('questdb').failures).toBe(0);
  });

  it('sends again what QuestDB acknowledged into a table dropped and made anew by hand between two checks', async () => {
    const table = uniqueTable('remade');
    const gw: TestGateway = await startTestGateway({ QUESTDB_TABLE: table });
    started.push(gw);
    expect((await gw.post('/api/v2/ingest/batch', batch(0, 5))).status).toBe(200);
    await waitForDrained(gw);
    const ddl = (await sql<[string]>(`SHOW CREATE TABLE "${table}"`)).dataset[0]![0];
    await sql(`DROP TABLE "${table}"`);
    await sql(ddl);
    expect((await gw.post('/api/v2/ingest/batch', batch(5, 5))).status).toBe(200);
    expect((await gw.post('/api/v2/ingest/batch', batch(10, 5))).status).toBe(200);
    // Within the next check (5 s) the sink finds another table and sends what it keeps again.
    expect(await waitForCount(`SELECT count() FROM "${table}"`, 15, 30_000)).toBe(15);
    await waitForWalApplied(table);
    expect(await storedCounts(table)).toEqual({ rows: 15, distinct: 15 });
    expect(gw.gateway.queue.deadLetterCount()).toBe(0);
  });
});
