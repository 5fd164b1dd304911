// QuestDB outage under sustained load: QuestDB is stopped for a while and started again. The
// gateway must keep answering 200, stay ready, show the backlog in /status, keep its memory
// bounded, and afterwards deliver every accepted reading exactly once.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevices } from '../lib/device-load.mjs';
import { startGatewayProcess, waitForEmptyQueue } from '../lib/gateway-process.mjs';
import { startQuestDb } from '../lib/questdb.mjs';
import { storedCounts } from '../lib/questdb-sql.mjs';

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
    /** @type {{ ready: boolean, queue: { readings: number } }} */ (
      await (await fetch(`${url}/status`, { headers: { 'x-api-key': KEY } })).json()
    );

  const load = startDevices({ url, apiKey: KEY, date: '2026-10-01', batchSize: 200, pauseMs: 5 });
  let backlogDuringOutage = 0;
  let readyDuringOutage = true;
  try {
    await new Promise((r) => setTimeout(r, 2000));
    log(`stopping QuestDB for ${outageMs} ms under load (${load.accepted} readings accepted so far)`);
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
    await load.stop();
  }
  await waitForEmptyQueue(status);
  const peak = peakRssMb();
  child.kill('SIGTERM');
  await exited;
  const { rows: stored, distinct } = await storedCounts(questdb.httpUrl, 'outage');
  await questdb.stop();
  rmSync(qdbDir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  return { accepted: load.accepted, refused: load.refused, stored, distinct, peakRssMb: peak, backlogDuringOutage, readyDuringOutage };
}
