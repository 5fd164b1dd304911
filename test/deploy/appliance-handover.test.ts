// The readings of a queue file handed from one release to another, with the real parts: a gateway
// fills its queue while QuestDB is away, a copy is taken as before a trial, more readings come;
// the bundle's `queue export` writes what came after the copy, and the appliance's handover
// (appliance/board/handover.mjs) sends it through another gateway's ingest API on loopback, which
// delivers to the suite's QuestDB. Each reading is stored once, also when it is handed over twice.
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { exportInSlot, exportPending, loopbackIngest, replayHandover, runHandovers } from '../../appliance/board/handover.mjs';
import { freePort } from '../../scripts/lib/ports.mjs';
import { TEST_KEY } from '../support/gateway.js';
import { type GatewayProcess, gatewayEnv, killAll, spawnGateway } from '../support/process.js';
import { sql, storedCounts, waitForCount } from '../support/questdb-sql.js';
import { tempDir } from '../support/temp-dir.js';

const running: GatewayProcess[] = [];
afterAll(() => killAll(running));

/** Posts batches of `count` readings from `from` on, half with their own time and half without (receive times). */
async function post(url: string, from: number, count: number) {
  for (let n = from; n < from + count; n += 50) {
    const batch = Array.from({ length: Math.min(50, from + count - n) }, (_, i) => {
      const value = n + i;
      return value % 2 === 0
        ? { time: new Date(Date.now() - 3_600_000 + value).toISOString(), ship_id: 'handover', cargo_id: 'timed', value }
        : { ship_id: 'handover', cargo_id: 'received', value };
    });
    const response = await fetch(`${url}/api/v2/ingest/batch`, {
      method: 'POST',
      headers: { 'x-api-key': TEST_KEY, 'content-type': 'application/json' },
      body: JSON.stringify(batch),
    });
    expect(response.status).toBe(200);
  }
}

async function stop(gateway: GatewayProcess) {
  gateway.child.kill('SIGTERM');
  expect((await gateway.exited).code).toBe(0);
}

describe('handing a queue file over to another release', () => {
  it('exports what came after the copy from before, and the other gateway delivers each reading once, twice handed over', async () => {
    // The release on trial: QuestDB away, so everything stays queued.
    const from = gatewayEnv('handover-from', { QUESTDB_URL: `http://127.0.0.1:${await freePort()}` });
    let gateway = await spawnGateway(from);
    running.push(gateway);
    await post(gateway.url, 0, 300);
    await stop(gateway);
    const updates = tempDir('handover-updates');
    const dir = join(updates, 'handover', '2026-11-26T10-00-00-000Z');
    mkdirSync(join(dir, 'before'), { recursive: true });
    for (const name of ['queue.db', 'queue.db-wal'])
      if (existsSync(join(from.DATA_DIR, name))) copyFileSync(join(from.DATA_DIR, name), join(dir, 'before', name));
    gateway = await spawnGateway(from);
    running.push(gateway);
    await post(gateway.url, 300, 700);
    await stop(gateway);
    // Set aside as after a failed trial: the newer file moves into the handover folder.
    mkdirSync(join(dir, 'queue'));
    for (const name of ['queue.db', 'queue.db-wal', 'queue.db-shm'])
      if (existsSync(join(from.DATA_DIR, name))) renameSync(join(from.DATA_DIR, name), join(dir, 'queue', name));
    writeFileSync(
      join(dir, 'handover.json'),
      JSON.stringify({ id: 'trial', from: 'trial', to: 'previous', exporter: 'B', after: true, state: 'export', announcement: '' }),
    );
    // The failed slot's release exports; here the suite's bundle stands for it.
    const exporter = (_slot: unknown, where: string, after: boolean) =>
      exportInSlot(null, where, after, [process.execPath, inject('bundlePath')]);
    exportPending({ updateDir: updates, exporter });
    expect(JSON.parse(readFileSync(join(dir, 'handover.json'), 'utf8'))).toMatchObject({
      state: 'replay',
      exported: { readings: 700, deadLetters: 0 },
    });
    const again = tempDir('handover-again');
    copyFileSync(join(dir, 'readings.ndjson'), join(again, 'readings.ndjson'));

    // The release that runs now takes them through its ingest API and delivers them.
    const to = gatewayEnv('handover-to');
    const previous = await spawnGateway(to);
    running.push(previous);
    const ingest = loopbackIngest({ port: new URL(previous.url).port, apiKey: TEST_KEY });
    const told = await runHandovers({ ingest, updateDir: updates, exporter });
    expect(told).toEqual(['The 700 readings left in the queue of trial were handed to previous.']);
    // Done: nothing is left pending; the record is kept, without the copies.
    expect(existsSync(dir)).toBe(false);
    const done = join(updates, 'handed-over', '2026-11-26T10-00-00-000Z');
    expect(JSON.parse(readFileSync(join(done, 'handover.json'), 'utf8'))).toMatchObject({ state: 'done', refused: 0 });
    expect(existsSync(join(done, 'queue'))).toBe(false);
    await waitForCount(`SELECT count() FROM "${to.QUESTDB_TABLE}"`, 700, 60_000);

    // Handed over a second time (a power cut before the note of the last batch): stored once all the same.
    const record = { id: 'again', from: 'trial', to: 'previous', exporter: null, after: false, state: 'replay' as const, announcement: '' };
    expect(await replayHandover(again, record, ingest)).toBe(0);
    await waitForCount(`SELECT count() FROM "${to.QUESTDB_TABLE}"`, 700, 60_000);
    await new Promise((r) => setTimeout(r, 5000));
    expect(await storedCounts(to.QUESTDB_TABLE)).toEqual({ rows: 700, distinct: 700 });
    const values = (await sql<[number]>(`SELECT value FROM "${to.QUESTDB_TABLE}" ORDER BY value`)).dataset.map(([v]) => v);
    expect(values).toEqual(Array.from({ length: 700 }, (_, i) => 300 + i));
  }, 240_000);
});
