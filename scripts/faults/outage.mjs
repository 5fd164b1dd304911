// QuestDB outage under sustained load: QuestDB is stopped for a while and started again. The
// gateway must keep answering 200, stay ready, show the backlog in /status, keep its memory
// bounded, and afterwards deliver every accepted reading exactly once.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGatewayProcess } from '../gateway-process.mjs';
import { startQuestDb } from '../questdb.mjs';

const KEY = 'outage-test-key-0123456789';

/**
 * @param {{ bundlePath: string, outageMs: number, log?: (line: string) => void }} options
 * @returns {Promise<{ accepted: number, refused: number, stored: number, distinct: number, peakRssMb: number,
 *   backlogDuringOutage: number, readyDuringOutage: boolean }>}
 */
export async function runOutage({ bundlePath, outageMs, log = () => undefined }) {
  const qdbDir = mkdtempSync(join(tmpdir(), 'harbor-outage-qdb-'));
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-outage-gw-'));
  let questdb = await startQuestDb({ dataDir: qdbDir });
  const { httpPort, pgPort } = questdb;
  const { child, url, exited } = await startGatewayProcess({
    bundle: bundlePath,
    env: {
      API_KEY: KEY,
      DATA_DIR: dataDir,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: 'outage',
      DURABILITY: 'process-crash',
      RETENTION_DAYS: '0',
      FLUSH_BACKOFF_MAX_MS: '1000',
    },
  });
  const peakRssMb = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  const status = async () =>
    /** @type {{ ready: boolean, queue: { readings: number } }} */ (await (await fetch(`${url}/status`, { headers: { 'x-api-key': KEY } })).json());

  let accepted = 0;
  let refused = 0;
  let sequence = 0;
  let running = true;
  const device = async (/** @type {number} */ id) => {
    while (running) {
      const batch = Array.from({ length: 200 }, () => {
        const n = sequence++;
        return { time: `2026-10-01T00:00:00.${String(n).padStart(9, '0')}Z`, ship_id: `device-${id}`, cargo_id: 'seq', value: n };
      });
      const response = await fetch(`${url}/api/v2/ingest/batch`, { method: 'POST', headers: { 'x-api-key': KEY }, body: JSON.stringify(batch) });
      await response.arrayBuffer();
      if (response.status === 200) accepted += batch.length;
      else refused += 1;
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const load = Promise.all([0, 1, 2, 3].map(device));
  let backlogDuringOutage = 0;
  let readyDuringOutage = true;
  try {
    await new Promise((r) => setTimeout(r, 2000));
    log(`stopping QuestDB for ${outageMs} ms under load (${accepted} readings accepted so far)`);
    await questdb.stop();
    const until = Date.now() + outageMs;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await status();
      readyDuringOutage &&= now.ready && (await fetch(`${url}/readyz`)).status === 200;
      backlogDuringOutage = Math.max(backlogDuringOutage, now.queue.readings);
    }
    log(`starting QuestDB again; backlog ${backlogDuringOutage} readings, peak RSS ${peakRssMb().toFixed(1)} MB`);
    questdb = await startQuestDb({ dataDir: qdbDir, httpPort, pgPort });
    await new Promise((r) => setTimeout(r, 2000));
  } finally {
    running = false;
    await load;
  }
  const deadline = Date.now() + 120_000;
  while ((await status()).queue.readings > 0) {
    if (Date.now() > deadline) throw new Error('backlog did not drain within 120 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const peak = peakRssMb();
  child.kill('SIGTERM');
  await exited;
  const query = async (/** @type {string} */ sql) =>
    Number((/** @type {{ dataset: number[][] }} */ (await (await fetch(`${questdb.httpUrl}/exec?query=${encodeURIComponent(sql)}`)).json())).dataset[0]?.[0]);
  for (let i = 0; i < 300; i++) {
    const [row] = /** @type {{ dataset: number[][] }} */ (await (await fetch(`${questdb.httpUrl}/exec?query=${encodeURIComponent("SELECT writerTxn, sequencerTxn FROM wal_tables() WHERE name = 'outage'")}`)).json()).dataset;
    if (row && row[0] === row[1]) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const stored = await query('SELECT count() FROM outage');
  const distinct = await query('SELECT count() FROM (SELECT DISTINCT value FROM outage)');
  await questdb.stop();
  rmSync(qdbDir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  return { accepted, refused, stored, distinct, peakRssMb: peak, backlogDuringOutage, readyDuringOutage };
}
