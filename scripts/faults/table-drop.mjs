// The readings table dropped by hand while readings flow: the gateway must notice, set its table
// up again and send again what its replay window kept, so that afterwards every reading answered
// 2xx is in the table exactly once. Two ways QuestDB may run:
// - `shipped`: as the project runs it (ILP creates no table): the next write fails and the sink
//   creates the table again.
// - `auto-create`: ILP creates tables (QuestDB's default): the next write creates a table without
//   `time`, deduplication or TTL; the sink's table check refuses it and stops, and this run drops it
//   as an operator would, once /status says so.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevices } from '../lib/device-load.mjs';
import { startGatewayProcess, waitForEmptyQueue } from '../lib/gateway-process.mjs';
import { QUESTDB_GUARANTEE_SETTINGS, startQuestDb } from '../lib/questdb.mjs';
import { sql, storedCounts, waitForCount } from '../lib/questdb-sql.mjs';

const KEY = 'table-drop-test-key-0123456789';
const TABLE = 'dropped_under_load';

/**
 * @param {{ bundlePath: string, questdb: 'shipped' | 'auto-create', drops: number, log?: (line: string) => void }} options
 * @returns {Promise<{ questdb: string, drops: number, accepted: number, refused: number, stored: number, distinct: number,
 *   maxValueOk: boolean, noticedMs: number[], deadLetters: number }>}
 */
export async function runTableDrop({ bundlePath, questdb: mode, drops, log = () => undefined }) {
  const qdbDir = mkdtempSync(join(tmpdir(), 'harbor-drop-qdb-'));
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-drop-gw-'));
  const env =
    mode === 'auto-create' ? Object.fromEntries(Object.keys(QUESTDB_GUARANTEE_SETTINGS).map((name) => [name, 'true'])) : undefined;
  const questdb = await startQuestDb({ dataDir: qdbDir, ...(env === undefined ? {} : { env }) });
  const gateway = await startGatewayProcess({
    bundle: bundlePath,
    env: {
      API_KEY: KEY,
      DATA_DIR: dataDir,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: TABLE,
      DURABILITY: 'process-crash',
      RETENTION_DAYS: '0',
      FLUSH_BACKOFF_MAX_MS: '500',
    },
  });
  const status = async () =>
    /** @type {{ queue: { readings: number }, deadLetters: number, sinks: { name: string, lastError: { at: string, message: string } | null }[] }} */ (
      await (await fetch(`${gateway.url}/status`, { headers: { 'x-api-key': KEY } })).json()
    );
  const load = startDevices({ url: gateway.url, apiKey: KEY, date: '2026-10-01', batchSize: 200, pauseMs: 5 });
  /** @type {number[]} */
  const noticedMs = [];
  try {
    for (let drop = 1; drop <= drops; drop++) {
      await new Promise((r) => setTimeout(r, 3000));
      log(`dropping ${TABLE} (${drop} of ${drops}) under load; ${load.accepted} readings accepted so far`);
      const droppedAt = Date.now();
      await sql(questdb.httpUrl, `DROP TABLE "${TABLE}"`);
      if (mode === 'auto-create') {
        // The operator's part: drop the table ILP made once the gateway reports it.
        const deadline = Date.now() + 30_000;
        for (;;) {
          const error = (await status()).sinks.find((s) => s.name === 'questdb')?.lastError;
          if (
            error !== undefined &&
            error !== null &&
            Date.parse(error.at) >= droppedAt &&
            /is not the table the gateway set up/.test(error.message)
          )
            break;
          if (Date.now() > deadline) throw new Error('the gateway did not report the table ILP created within 30 s');
          await new Promise((r) => setTimeout(r, 100));
        }
        noticedMs.push(Date.now() - droppedAt);
        log(`the gateway reported the table ILP created after ${noticedMs.at(-1)} ms; dropping it`);
        await sql(questdb.httpUrl, `DROP TABLE IF EXISTS "${TABLE}"`);
      }
    }
    await new Promise((r) => setTimeout(r, 3000));
  } finally {
    await load.stop();
  }
  await waitForEmptyQueue(status);
  // The kept readings are sent again after the check that found the table gone (every 5 s).
  await waitForCount(questdb.httpUrl, `SELECT count() FROM "${TABLE}"`, load.accepted, 60_000);
  const { deadLetters } = await status();
  gateway.child.kill('SIGTERM');
  await gateway.exited;
  const { rows: stored, distinct } = await storedCounts(questdb.httpUrl, TABLE);
  const maxValue = Number((await sql(questdb.httpUrl, `SELECT max(value) FROM "${TABLE}"`)).dataset[0]?.[0]);
  await questdb.stop();
  rmSync(qdbDir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  return {
    questdb: mode,
    drops,
    accepted: load.accepted,
    refused: load.refused,
    stored,
    distinct,
    maxValueOk: maxValue < load.sent,
    noticedMs,
    deadLetters,
  };
}

/** Every reading answered 2xx stored once, none other, nothing refused or dead-lettered. */
export const tableDropPassed = (/** @type {Awaited<ReturnType<typeof runTableDrop>>} */ r) =>
  r.refused === 0 && r.deadLetters === 0 && r.maxValueOk && r.stored === r.accepted && r.distinct === r.accepted;
