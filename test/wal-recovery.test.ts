import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../scripts/lib/ports.mjs';
import { type QuestDbServer, startQuestDb } from '../scripts/lib/questdb.mjs';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { recoverWal, walStatus } from '../src/questdb/wal-recovery.js';
import { QuestDbTarget } from '../src/sinks/questdb/questdb-target.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

// A QuestDB of its own: suspending a table by hand (`SUSPEND WAL`) needs QuestDB's dev mode, and
// one test stops QuestDB to take WAL files away, as a power cut does.

const dataDir = tempDir('wal-recovery');
let questdb: QuestDbServer;
let client: QuestDbHttp;
let ports: { httpPort: number; pgPort: number };
const logs: Record<string, unknown>[] = [];
const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) });

const start = async () => {
  questdb = await startQuestDb({ dataDir, ...ports, heap: '256m', env: { QDB_DEV_MODE_ENABLED: 'true' } });
  client = new QuestDbHttp({ url: questdb.httpUrl, timeoutMs: 10_000, username: undefined, password: undefined });
};

beforeAll(async () => {
  const [httpPort, pgPort] = await freePorts(2);
  ports = { httpPort: httpPort!, pgPort: pgPort! };
  await start();
});

afterAll(async () => {
  await client?.close();
  await questdb?.stop();
});

let tables = 0;
async function newTable(): Promise<string> {
  const table = `wal_recovery_${++tables}`;
  await client.exec(
    `CREATE TABLE ${table} (time TIMESTAMP_NS, ship_id SYMBOL, cargo_id SYMBOL, value DOUBLE) TIMESTAMP(time) PARTITION BY DAY WAL DEDUP UPSERT KEYS(time, ship_id, cargo_id)`,
  );
  return table;
}

const insert = (table: string, second: number) =>
  client.exec(`INSERT INTO ${table} VALUES ('2026-01-01T00:00:0${second}Z', 'ship', 'cargo', ${second})`);

async function values(table: string): Promise<number[]> {
  const answer = await client.exec<{ dataset: [number][] }>(`SELECT value FROM ${table} ORDER BY time`);
  return answer.dataset.map(([value]) => value);
}

const applied = (table: string) =>
  waitUntil(`${table} applied`, async () => {
    const status = await walStatus(client, table);
    return status !== undefined && !status.suspended && status.writerTxn === status.sequencerTxn;
  });

describe('WAL recovery', () => {
  it('leaves a healthy table alone', async () => {
    const table = await newTable();
    await insert(table, 1);
    await applied(table);

    const recovery = await recoverWal(client, table, logger);

    expect(recovery).toMatchObject({ wasSuspended: false, suspended: false, skipped: [] });
  });

  it('resumes a suspended table from the transaction it stopped at, losing nothing', async () => {
    const table = await newTable();
    await insert(table, 1);
    await applied(table);
    await client.exec(`ALTER TABLE ${table} SUSPEND WAL`);
    await insert(table, 2);
    expect(await walStatus(client, table)).toMatchObject({ suspended: true, writerTxn: 1, sequencerTxn: 2 });

    const recovery = await recoverWal(client, table, logger);

    expect(recovery).toMatchObject({ wasSuspended: true, suspended: false, skipped: [] });
    await applied(table);
    expect(await values(table)).toEqual([1, 2]);
  });

  it("the sink's check asks two questions, the table's state with its WAL state and its columns, and resumes a suspended table", async () => {
    const table = `wal_recovery_${++tables}`;
    await client.exec(
      `CREATE TABLE ${table} (time TIMESTAMP_NS, ship_id SYMBOL, cargo_id SYMBOL, value DOUBLE, site SYMBOL) TIMESTAMP(time) PARTITION BY DAY WAL DEDUP UPSERT KEYS(time, ship_id, cargo_id, site)`,
    );
    await client.exec(`INSERT INTO ${table} (time, ship_id, cargo_id, value) VALUES ('2026-01-01T00:00:01Z', 'ship', 'cargo', 1)`);
    await applied(table);
    const asked: string[] = [];
    const counting = {
      write: client.write.bind(client),
      close: async () => undefined,
      reconnect: async () => undefined,
      exec: <T>(statement: string): Promise<T> => {
        asked.push(statement);
        return client.exec<T>(statement);
      },
    };
    const target = new QuestDbTarget({
      questdb: counting,
      logger,
      options: { name: 'questdb', describe: 'local', table, retentionDays: undefined, site: 'site-a', resumesWal: true },
    });
    expect(await target.recover()).toEqual({ ok: true, resumed: true });
    asked.length = 0;
    expect(await target.recover()).toEqual({ ok: true, resumed: false });
    expect(asked).toHaveLength(2);

    await client.exec(`ALTER TABLE ${table} SUSPEND WAL`);
    await client.exec(`INSERT INTO ${table} (time, ship_id, cargo_id, value) VALUES ('2026-01-01T00:00:02Z', 'ship', 'cargo', 2)`);
    expect(await target.recover()).toEqual({ ok: true, resumed: true });
    await applied(table);
    expect(await values(table)).toEqual([1, 2]);
    expect(logs.some((line) => line.event === 'questdb_wal_suspended' && line.table === table)).toBe(true);
  });

  it('skips the transactions whose WAL files are gone, logs each as an error, and the table takes writes again', async () => {
    const table = await newTable();
    await insert(table, 1);
    await applied(table);
    // Two transactions the sequencer holds but the table has not applied, then their WAL files go,
    // as a power cut takes files the kernel had not written back.
    await client.exec(`ALTER TABLE ${table} SUSPEND WAL`);
    await insert(table, 2);
    await insert(table, 3);
    await client.close();
    await questdb.stop();
    const tableDir = readdirSync(join(dataDir, 'db')).find((name) => name.startsWith(`${table}~`));
    if (tableDir === undefined) throw new Error(`no directory of ${table} in ${dataDir}/db`);
    for (const name of readdirSync(join(dataDir, 'db', tableDir))) {
      if (/^wal\d+$/.test(name)) rmSync(join(dataDir, 'db', tableDir, name), { recursive: true });
    }
    await start();
    await waitUntil(`${table} suspended`, async () => (await walStatus(client, table))?.suspended === true);
    logs.length = 0;

    const recovery = await recoverWal(client, table, logger);

    expect(recovery).toMatchObject({ wasSuspended: true, suspended: false, skipped: [2, 3] });
    const suspensions = logs.filter((line) => line.event === 'questdb_wal_suspended');
    expect(suspensions.every((line) => line.level === 50)).toBe(true);
    expect(suspensions.filter((line) => line.action === 'skip').map((line) => line.failedTxn)).toEqual([2, 3]);
    expect(String(suspensions[0]?.errorMessage)).toMatch(/cannot read WAL event file for seqTxn=2/);
    await insert(table, 4);
    await applied(table);
    expect(await values(table)).toEqual([1, 4]);
  });
});
