import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, uniqueTable, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw.stop());

type Row = [time: string, ship: string, cargo: string, value: number];

/** Rows of one device as QuestDB holds them, nanosecond time as a decimal string. */
async function rowsOf(ship: string, expected: number): Promise<Row[]> {
  const where = `FROM "${gw.table}" WHERE ship_id = '${ship.replaceAll("'", "''")}'`;
  expect(await waitForCount(`SELECT count() ${where}`, expected)).toBe(expected);
  const answer = await sql<Row>(`SELECT cast(cast(time AS long) AS string), ship_id, cargo_id, value ${where} ORDER BY time, cargo_id`);
  return answer.dataset;
}

const ns = (iso: string, fraction: string): string => `${Date.parse(iso) / 1000}${fraction.padEnd(9, '0')}`;

describe('readings land in QuestDB exactly', () => {
  it('keeps every timestamp precision and offset to the nanosecond', async () => {
    const ship = 'precision-ship';
    const batch = [
      { time: '2026-03-01T10:00:00Z', cargo_id: 'none', value: 1 },
      { time: '2026-03-01T10:00:00.123Z', cargo_id: 'ms', value: 2 },
      { time: '2026-03-01T10:00:00.123456Z', cargo_id: 'us', value: 3 },
      { time: '2026-03-01T10:00:00.123456789Z', cargo_id: 'ns', value: 4 },
      { time: '2026-03-01T12:30:00.000000001+02:30', cargo_id: 'offset', value: 5 },
      { time: '2026-03-01T05:00:00.999999999-05:00', cargo_id: 'negative-offset', value: 6 },
    ].map((r) => ({ ...r, ship_id: ship }));
    expect((await gw.post('/api/v2/ingest/batch', batch)).status).toBe(200);
    expect(await rowsOf(ship, 6)).toEqual([
      [ns('2026-03-01T10:00:00Z', ''), ship, 'none', 1],
      [ns('2026-03-01T10:00:00Z', '000000001'), ship, 'offset', 5],
      [ns('2026-03-01T10:00:00Z', '123'), ship, 'ms', 2],
      [ns('2026-03-01T10:00:00Z', '123456'), ship, 'us', 3],
      [ns('2026-03-01T10:00:00Z', '123456789'), ship, 'ns', 4],
      [ns('2026-03-01T10:00:00Z', '999999999'), ship, 'negative-offset', 6],
    ]);
  });

  it('keeps doubles exactly, a float32-widened value, -0 and the extremes included', async () => {
    const ship = 'double-ship';
    const values = [
      23.700000762939453, -0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308, 0.1, 1e21,
      123456789012345680,
    ];
    const batch = values.map((value, i) => ({ time: `2026-03-02T00:00:00.00000000${i}Z`, ship_id: ship, cargo_id: 'v', value }));
    // JSON.stringify writes -0 as 0; devices can send -0, so send its text as they would.
    const body = JSON.stringify(batch, (key, value: unknown) => (key === 'value' && Object.is(value, -0) ? '@minus-zero@' : value));
    expect((await gw.post('/api/v2/ingest/batch', body.replace('"@minus-zero@"', '-0'))).status).toBe(200);
    const stored = (await rowsOf(ship, values.length)).map((row) => row[3]);
    for (const [i, value] of stored.entries()) expect(Object.is(value, values[i])).toBe(true);
  });

  it('round-trips ids with spaces, commas, equals signs, quotes, backslashes and non-ASCII', async () => {
    const ids = ['ship one', 'a,b', 'k=v', 'say "hi"', "it's", 'back\\slash', 'end\\', 'Łódź-🚢', '港口', 'ümlaut =,\\ "', '#hash'];
    const batch = ids.map((id, i) => ({ time: `2026-03-03T00:00:0${i % 10}.${i}Z`, ship_id: id, cargo_id: `${id}/metric`, value: i }));
    expect((await gw.post('/api/v2/ingest/batch', batch)).status).toBe(200);
    for (const [i, id] of ids.entries()) {
      const rows = await rowsOf(id, 1);
      expect(rows.map((r) => [r[1], r[2], r[3]])).toEqual([[id, `${id}/metric`, i]]);
    }
  });

  it('stores a single push and gives readings without time distinct receive times', async () => {
    const ship = 'clockless-ship';
    const before = BigInt(Date.now()) * 1_000_000n;
    expect((await gw.post('/api/v2/ingest/', { ship_id: ship, cargo_id: 'temp', value: 1 })).status).toBe(200);
    expect(
      (
        await gw.post(
          '/api/v2/ingest/batch',
          [1, 2, 3].map((value) => ({ ship_id: ship, cargo_id: 'temp', value })),
        )
      ).status,
    ).toBe(200);
    const after = BigInt(Date.now() + 1) * 1_000_000n;
    const rows = await rowsOf(ship, 4);
    expect(rows.map((r) => r[3])).toEqual([1, 1, 2, 3]);
    const times = rows.map((r) => BigInt(r[0]));
    expect(new Set(times).size).toBe(4);
    for (const time of times) {
      expect(time >= before && time < after).toBe(true);
    }
  });

  it('gives a request without times one receive time, a series met twice in it the next nanosecond, and the next request its own', async () => {
    const ship = 'one-time-per-request';
    const pair = (value: number) => [
      { ship_id: ship, cargo_id: 'latitude', value },
      { ship_id: ship, cargo_id: 'longitude', value },
      { ship_id: ship, cargo_id: 'latitude', value: value + 0.5 },
    ];
    for (const value of [1, 2]) expect((await gw.post('/api/v2/ingest/batch', pair(value))).status).toBe(200);
    const rows = await rowsOf(ship, 6);
    const at = (cargo: string, value: number) => BigInt(rows.find((r) => r[2] === cargo && r[3] === value)![0]);
    // The pair shares a time, as the existing stack stamps one time per request.
    expect(at('longitude', 1)).toBe(at('latitude', 1));
    expect(at('latitude', 1.5)).toBe(at('latitude', 1) + 1n);
    expect(at('longitude', 2)).toBe(at('latitude', 2));
    expect(at('latitude', 2) > at('latitude', 1.5)).toBe(true);
  });

  it('stores a replayed reading once (deduplication on time, ship_id, cargo_id)', async () => {
    const ship = 'replay-ship';
    const batch = [{ time: '2026-03-04T00:00:00.5Z', ship_id: ship, cargo_id: 'c', value: 7 }];
    expect((await gw.post('/api/v2/ingest/batch', batch)).status).toBe(200);
    expect(await rowsOf(ship, 1)).toHaveLength(1);
    expect((await gw.post('/api/v2/ingest/batch', batch)).status).toBe(200);
    await waitForDrained(gw);
    await waitForWalApplied(gw.table);
    expect(await rowsOf(ship, 1)).toHaveLength(1);
  });

  it('creates the table as documented, and applies a changed retention at the next start', async () => {
    const table = uniqueTable('ddl');
    const first = await startTestGateway({ QUESTDB_TABLE: table, RETENTION_DAYS: '365' });
    expect((await first.post('/api/v2/ingest/', { ship_id: 's', cargo_id: 'c', value: 1 })).status).toBe(200);
    await waitForDrained(first);
    await first.stop();
    const ddl = async () => (await sql<[string]>(`SHOW CREATE TABLE "${table}"`)).dataset[0]![0];
    expect(await ddl()).toMatch(/time TIMESTAMP_NS,\s*ship_id SYMBOL,\s*cargo_id SYMBOL,\s*value DOUBLE/);
    expect(await ddl()).toMatch(/timestamp\(time\) PARTITION BY DAY TTL 365 DAYS/);
    expect(await ddl()).toMatch(/DEDUP UPSERT KEYS\(time,ship_id,cargo_id\)/);

    const second = await startTestGateway({ QUESTDB_TABLE: table, RETENTION_DAYS: '30' });
    expect((await second.post('/api/v2/ingest/', { ship_id: 's', cargo_id: 'c', value: 2 })).status).toBe(200);
    await waitForDrained(second);
    await second.stop();
    await waitForWalApplied(table);
    expect(await ddl()).toMatch(/PARTITION BY DAY TTL 30 DAYS/);
  });

  it('leaves a table already as needed unaltered when it starts again, and restores deduplication an operator turned off', async () => {
    const table = uniqueTable('unaltered');
    // Every ALTER of a WAL table is a transaction that raises the table's structure version.
    const structureVersion = async () =>
      (await sql<[number]>(`SELECT max(structureVersion) FROM wal_transactions('${table}')`)).dataset[0]![0];
    const run = async (value: number) => {
      const gw = await startTestGateway({ QUESTDB_TABLE: table, RETENTION_DAYS: '30' });
      expect((await gw.post('/api/v2/ingest/', { ship_id: 's', cargo_id: 'c', value })).status).toBe(200);
      await waitForDrained(gw);
      await gw.stop();
      await waitForWalApplied(table);
    };
    await run(1);
    const afterCreate = await structureVersion();
    await run(2);
    expect(await structureVersion()).toBe(afterCreate);

    await sql(`ALTER TABLE "${table}" DEDUP DISABLE`);
    await waitForWalApplied(table);
    await run(3);
    expect((await sql<[boolean]>(`SELECT dedup FROM tables() WHERE table_name = '${table}'`)).dataset[0]![0]).toBe(true);
    expect((await sql<[string]>(`SHOW CREATE TABLE "${table}"`)).dataset[0]![0]).toMatch(
      /TTL 30 DAYS[\s\S]*DEDUP UPSERT KEYS\(time,ship_id,cargo_id\)/,
    );
  });
});
