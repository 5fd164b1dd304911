// Power cuts of the gateway and QuestDB together: both data directories on powercut-fs, QuestDB
// with the commit mode the systemd unit (and compose) set. After each round the gateway and QuestDB
// are killed with SIGKILL, both file systems lose what was not fsynced, and both start again on
// what survived. The gateway lets a reading go from its queue once QuestDB acknowledged it, so
// every reading answered 2xx must still be in QuestDB at the end: one that QuestDB acknowledged
// and then lost in the cut is missing.
//
// Two models of QuestDB's disk: `realistic`, where the kernel writes back what has been dirty for
// 30 s every 5 s (Linux's vm.dirty_expire_centisecs=3000, vm.dirty_writeback_centisecs=500), and
// `strict`, where only fsync makes anything durable (QuestDB's start-up files excepted, written back
// by hand after each start). Rounds run 1 to 45 s, so cuts fall before and after the writeback age.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { createPowercutDisk } from '../lib/powercut-fs.mjs';
import { freePorts } from '../lib/ports.mjs';
import { projectRoot } from '../lib/paths.mjs';
import { startQuestDb } from '../lib/questdb.mjs';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';
import { briefly, powerCutStorage } from './power-cut.mjs';

/** The QuestDB settings of the shipped unit that decide what survives a cut. */
function unitSettings() {
  const unit = readFileSync(join(projectRoot, 'systemd', 'harbor-questdb.service'), 'utf8');
  /** @type {Record<string, string>} */
  const env = {};
  for (const name of ['QDB_CAIRO_COMMIT_MODE', 'QDB_LINE_AUTO_CREATE_NEW_TABLES']) {
    const match = new RegExp(`^Environment=${name}=(\\S+)$`, 'm').exec(unit);
    if (!match) throw new Error(`systemd/harbor-questdb.service does not set ${name}`);
    env[name] = /** @type {string} */ (match[1]);
  }
  return env;
}

/** The kernel's writeback of dirty data on a stock Linux: age and flusher period. */
export const KERNEL_WRITEBACK = { afterMs: 30_000, everyMs: 5_000 };

/**
 * @typedef {'realistic' | 'strict'} DiskModel
 * @param {{ cuts: number, bundlePath: string, entries: 'per-directory' | 'ext4', model: DiskModel,
 *           roundMs?: { min: number, max: number }, replayWindowMs?: number, clients?: number, log: (line: string) => void }} options
 * @returns {Promise<boolean>} true when every reading answered 2xx survived
 */
export async function runQuestDbPowerCuts({
  cuts,
  bundlePath,
  entries,
  model,
  roundMs = { min: 1_000, max: 45_000 },
  replayWindowMs,
  clients = 4,
  log,
}) {
  const settings = unitSettings();
  const [httpPort, pgPort] = await freePorts(2);
  const gatewayStorage = await powerCutStorage();
  const questdbDisk = await createPowercutDisk(
    model === 'realistic'
      ? { entries, writebackAfterMs: KERNEL_WRITEBACK.afterMs, writebackEveryMs: KERNEL_WRITEBACK.everyMs }
      : { entries },
  );
  /** @type {import('../lib/powercut-fs.mjs').PowercutMount | undefined} */
  let questdbMount;
  /** @type {import('../lib/questdb.mjs').QuestDbServer | undefined} */
  let questdb;
  const questdbCuts = { cuts: 0, undoneWrites: 0, undoneEntries: 0, errors: /** @type {string[]} */ ([]) };
  log(
    `QuestDB power cuts: ${cuts} cuts, ${model} disk, entry changes durable ${entries}, rounds ${roundMs.min}-${roundMs.max} ms, replay window ${replayWindowMs ?? 'default'}, ${JSON.stringify(settings)}`,
  );

  /** @type {import('../lib/crash-consistency.mjs').CrashStorage} */
  const storage = {
    async open() {
      const dataDir = await gatewayStorage.open();
      questdbMount = await questdbDisk.mount();
      questdb = await startQuestDb({ dataDir: questdbMount.mountPoint, httpPort, pgPort, heap: '512m', env: settings });
      // QuestDB's start-up files (configuration, web console) are written without fsync. The
      // strict model writes them back at once; the realistic one leaves them to the kernel's age.
      if (model === 'strict') await questdbMount.writeBack();
      return dataDir;
    },
    async afterKill(random) {
      await questdb?.kill();
      const mount = /** @type {import('../lib/powercut-fs.mjs').PowercutMount} */ (questdbMount);
      const report = await mount.cut({ model: random() < 0.5 ? 'tear' : 'drop', seed: Math.floor(random() * 2 ** 32) });
      await mount.unmount();
      questdbCuts.cuts += 1;
      questdbCuts.undoneWrites += report.writes + report.resizes;
      questdbCuts.undoneEntries += report.entries;
      if (report.undone?.length) log(`QuestDB cut undid: ${report.undone.slice(0, 5).join(', ')}`);
      questdbCuts.errors.push(...(report.errors ?? []));
      await gatewayStorage.afterKill(random);
    },
    async close() {
      await questdb?.stop();
      await questdbDisk.remove();
      await gatewayStorage.close();
    },
  };

  const table = `powercut_${process.pid}`;
  // The gateway creates its table once, at installation, long before any cut: start it until the
  // table is ready, stop both, and let everything reach the disk before the rounds begin.
  /** @type {import('../lib/gateway-process.mjs').GatewayProcess | undefined} */
  let gateway;
  try {
    gateway = await startGatewayProcess({
      bundle: bundlePath,
      env: {
        API_KEY: 'powercut-setup-key-0123456789',
        DATA_DIR: await storage.open(),
        QUESTDB_URL: `http://127.0.0.1:${httpPort}`,
        QUESTDB_TABLE: table,
        HEALTH_REPORT: 'false',
        RETENTION_DAYS: '0',
      },
    });
    const deadline = Date.now() + 60_000;
    while (!gateway.logs.some((line) => line.event === 'table_ready')) {
      if (Date.now() > deadline) throw new Error(`the gateway did not create ${table}: ${JSON.stringify(gateway?.logs.slice(-5))}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    gateway.child.kill('SIGTERM');
    await gateway.exited;
    await questdb?.stop();
    const mount = /** @type {import('../lib/powercut-fs.mjs').PowercutMount} */ (questdbMount);
    await mount.writeBack();
    await mount.unmount();
    await gatewayStorage.settle();
  } catch (error) {
    // The rounds below clean up after themselves; the set-up must too, or its mounts stay.
    if (gateway?.child.exitCode === null) {
      gateway.child.kill('SIGKILL');
      await gateway.exited;
    }
    await storage.close().catch(() => undefined);
    throw error;
  }
  const report = await runCrashConsistency({
    rounds: cuts,
    durability: 'power-loss',
    questdbUrl: `http://127.0.0.1:${httpPort}`,
    bundlePath,
    clients,
    storage,
    table,
    log,
    roundMs,
    // Long rounds: a steady trickle rather than the most the machine can take, so the ledger of
    // answered readings stays small over many rounds.
    pauseMs: roundMs.max > 5_000 ? 100 : 0,
    gatewayEnv: replayWindowMs === undefined ? {} : { REPLAY_WINDOW_MS: String(replayWindowMs) },
  });
  const errors = [...questdbCuts.errors, ...gatewayStorage.tally.errors];
  const ok =
    report.missing.length === 0 &&
    report.forbidden.length === 0 &&
    report.strangers.length === 0 &&
    report.duplicates === 0 &&
    errors.length === 0;
  const summary = {
    ...briefly(report),
    questdb: { ...questdbCuts, errors: questdbCuts.errors.slice(0, 5) },
    gateway: { ...gatewayStorage.tally, errors: gatewayStorage.tally.errors.slice(0, 5) },
  };
  log(
    `power cuts of the gateway and QuestDB, ${model} disk, entry changes durable ${entries}, replay window ${replayWindowMs ?? 'default'} (expect 0 lost): ${ok ? 'PASS' : 'FAIL'} ${JSON.stringify(summary)}`,
  );
  return ok;
}
