// What every scenario shares: the run's context (options, QuestDB, the build under test, the load
// files), a fresh gateway per run, the footprint around a measured window, and small waits.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cpuBusyShares, cpuSeconds, cpuTimes, delta, sampleProcess } from '../../scripts/lib/proc.mjs';
import { rowCount, settleAndDrop, walApplied } from '../../scripts/lib/questdb-sql.mjs';
import { startBenchGateway } from './gateway.mjs';
import { list } from './options.mjs';

/**
 * @typedef {object} BenchContext
 * @property {import('./options.mjs').BenchOptions} options
 * @property {string} bundle        the build under test (dist/gateway.mjs, or the compared build)
 * @property {string} workDir       this invocation's directory of data directories and load files
 * @property {{ httpUrl: string, pid?: number }} questdb
 * @property {string} apiKey
 * @property {Record<'single' | 'batch100' | 'batch1000', { path: string, jsonBytesPerReading: number }>} loadFiles
 * @property {(label: string) => string} newTable   a table name no run used before
 * @property {(text: string) => void} say
 * @property {<T>(label: string, measure: () => Promise<T>) => Promise<T | undefined>} attempt  a run whose failure is recorded, not thrown
 */

/** @param {number} ms */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** @param {number} r */
export const fmtRate = (r) => `${Math.round(r).toLocaleString('en-US')}/s`;

/**
 * Sets the CPU affinity of every thread of a process.
 * @param {number} pid
 * @param {string} cpus
 */
export function pin(pid, cpus) {
  const done = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`taskset could not pin ${pid} to CPUs ${cpus}: ${done.stderr}`);
}

/** @param {string} spec  e.g. "0", "1,3", "2-5" */
export function cpuList(spec) {
  return list(spec).flatMap((part) => {
    const [a, b] = part.split('-').map(Number);
    return b === undefined
      ? [/** @type {number} */ (a)]
      : Array.from({ length: b - /** @type {number} */ (a) + 1 }, (_, i) => /** @type {number} */ (a) + i);
  });
}

/** @param {BenchContext} bench @param {number} size */
export const batchFile = (bench, size) => (size === 100 ? bench.loadFiles.batch100 : bench.loadFiles.batch1000);

/**
 * A fresh gateway (own data directory and QuestDB table) for one run.
 * @param {BenchContext} bench
 * @param {string} mode
 * @param {string} label
 * @param {Record<string, string>} [env]
 */
export async function freshGateway(bench, mode, label, env = {}) {
  const dataDir = mkdtempSync(join(bench.workDir, 'gateway-'));
  const table = bench.newTable(label);
  const gateway = await startBenchGateway({
    bundle: bench.bundle,
    apiKey: bench.apiKey,
    cpus: bench.options.pinning?.gateway,
    env: {
      DATA_DIR: dataDir,
      DURABILITY: mode,
      QUESTDB_URL: bench.questdb.httpUrl,
      QUESTDB_TABLE: table,
      ...bench.options.gatewayEnv,
      ...env,
    },
  });
  return {
    gateway,
    dataDir,
    table,
    /** Kills the gateway, removes its queue, and lets QuestDB finish with the table before dropping it. */
    async dispose() {
      await gateway.stop('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
      if (!(await settleAndDrop(bench.questdb.httpUrl, table)))
        bench.say(`warning: QuestDB did not apply the WAL of ${table} within 120 s`);
    },
  };
}

/**
 * Readings of the processes and CPUs around a measured window.
 * @param {BenchContext} bench
 * @param {number} gatewayPid
 */
export function snapshot(bench, gatewayPid) {
  return {
    gateway: sampleProcess(gatewayPid),
    questdbCpu: cpuSeconds(/** @type {number} */ (bench.questdb.pid)) ?? 0,
    cpus: cpuTimes(),
  };
}

/**
 * Footprint of the gateway and contention on the CPUs between two snapshots.
 * @param {BenchContext} bench
 * @param {ReturnType<typeof snapshot>} before
 * @param {ReturnType<typeof snapshot>} after
 * @param {number} readings  accepted (or flushed) readings in the window
 */
export function footprint(bench, before, after, readings) {
  const { pinning } = bench.options;
  const d = delta(before.gateway, after.gateway);
  const busy = cpuBusyShares(before.cpus, after.cpus);
  const loadCpus = pinning ? cpuList(pinning.load) : [...Object.keys(busy)].map(Number);
  const loadBusy = loadCpus.map((c) => busy[c] ?? 0);
  // Whatever kept the gateway's CPUs busy besides the gateway: other processes on the machine.
  const gatewayCpus = pinning ? cpuList(pinning.gateway) : [];
  const gatewayCpusBusy = gatewayCpus.reduce((sum, c) => sum + (busy[c] ?? 0), 0);
  return {
    footprint: {
      seconds: d.seconds,
      cpuSeconds: d.cpuSeconds,
      gatewayCpuShare: d.cpuSeconds / d.seconds,
      cpuSecondsPerMillion: readings > 0 ? (d.cpuSeconds / readings) * 1e6 : null,
      writeBytes: d.writeBytes,
      cancelledWriteBytes: d.cancelledWriteBytes,
      writeBytesPerReading: readings > 0 ? d.writeBytes / readings : null,
      rssKb: d.rssKb,
      hwmKb: d.hwmKb,
    },
    questdbCpuShare: (after.questdbCpu - before.questdbCpu) / d.seconds,
    cpuBusy: busy,
    loadCpuBusy: loadBusy.reduce((a, b) => a + b, 0) / Math.max(1, loadBusy.length),
    othersOnGatewayCpus: pinning ? Math.max(0, gatewayCpusBusy - d.cpuSeconds / d.seconds) / gatewayCpus.length : null,
  };
}

/**
 * @param {BenchContext} bench
 * @param {{ gateway: import('./gateway.mjs').BenchGateway }} run
 * @param {string} path
 * @param {string} body
 */
export async function post(bench, run, path, body) {
  const response = await fetch(`${run.gateway.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': bench.apiKey },
    body,
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`POST ${path} answered ${response.status}`);
}

/**
 * Polls `check` every `everyMs` until it returns true; false after `timeoutMs`.
 * @param {() => Promise<boolean>} check
 * @param {number} timeoutMs
 * @param {number} [everyMs]
 */
export async function waitFor(check, timeoutMs, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(everyMs);
  }
  return false;
}

/**
 * Waits until the gateway's queue is empty and QuestDB applied its WAL, then compares the rows of
 * the run's table with the readings the gateway accepted since it started.
 * @param {BenchContext} bench
 * @param {{ gateway: import('./gateway.mjs').BenchGateway, table: string }} gw
 * @returns {Promise<{ ok: boolean, rows: number, accepted: number }>}
 */
export async function allRowsArrived(bench, gw) {
  const drained = await waitFor(async () => (await gw.gateway.status()).queue.readings === 0, 300_000, 200);
  const accepted = (await gw.gateway.status()).totals.acceptedReadings;
  const applied = drained && (await walApplied(bench.questdb.httpUrl, gw.table, 120_000));
  const rows = (await rowCount(bench.questdb.httpUrl, gw.table)) ?? 0;
  return { ok: applied && rows === accepted, rows, accepted };
}
