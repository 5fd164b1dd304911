// Power cuts: the crash-consistency rounds with the gateway's data directory on powercut-fs. After
// each round everything the gateway had not made durable is undone, keeping what the disk model
// allows, the file system is unmounted and mounted again, and the next round restarts the gateway
// on what survived.
//
// The rounds create and delete files after the first one, so the entry model is exercised: the
// data directory is `site/data` on the disk, made by the gateway's first start; a quarter of the
// rounds end with SIGTERM (SQLite deletes its WAL files when the queue closes, and the next start
// makes them again), some killed while closing; and in every round a technician adds a device
// key with the CLI while the gateway runs (a new file renamed over the key file), or revokes one.
// A key change the CLI confirmed before the cut must be there after it, whatever the mode.
//
// power-loss mode must deliver every reading answered 2xx exactly once (on a lying disk: may lose
// only what was answered within its delay before the cut). process-crash mode must lose some: that
// proves the cuts bite, and measures how far back an answered reading can be lost.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';
import { createPowercutDisk } from '../lib/powercut-fs.mjs';

/**
 * The disk models of the gateway's rounds: what each cut keeps of what is not durable, and the
 * faults the disk produces meanwhile (scripts/powercut-fs/cut.go, journal.go).
 * @typedef {{ about: string, cut: (random: () => number) => import('../lib/powercut-fs.mjs').CutModel,
 *             faults?: import('../lib/powercut-fs.mjs').DiskFaults, ioFaults?: boolean, lyingFlushMs?: number,
 *             lossProofCuts?: number }} DiskModel
 *   `lossProofCuts`: how many times the cuts the process-crash rounds take, for a model under which
 *   a round loses nothing more often.
 * @type {Record<string, DiskModel>}
 */
export const DISK_MODELS = {
  tear: {
    about: 'nothing not durable survives; half the cuts tear a write drawn from all pending ones',
    cut: (random) => (random() < 0.5 ? 'tear' : 'drop'),
  },
  subset: { about: 'an arbitrary subset of what is not durable survives (later writes without earlier ones)', cut: () => 'subset' },
  'fsync-eio': {
    about: 'subset cuts; 5% of fsyncs with something to write fail with EIO and drop their writes (fsyncgate)',
    cut: () => 'subset',
    faults: { fsyncEio: 0.05 },
    ioFaults: true,
  },
  enospc: {
    about: 'subset cuts; 2% of writes that grow a file fail with ENOSPC',
    cut: () => 'subset',
    faults: { enospc: 0.02 },
    ioFaults: true,
    // About 38 % of starts fail, so a round takes few readings: 22 of 60 rounds measured lost none,
    // and five rounds all without a loss (about 0.7 % of runs) would fail the proof that cuts bite.
    lossProofCuts: 3,
  },
  // An in-order cache behind the lie: a cut keeps exactly what was acknowledged 200 ms before it.
  // Reordering on top (subset or tear cuts) corrupts SQLite's file, which relies on a flush's
  // order at checkpoints; no software above such a card can help.
  'lying-flush': {
    about: 'every fsync is acknowledged at once and durable only 200 ms later, in order; a cut keeps nothing younger',
    cut: () => 'drop',
    faults: { lyingFlushMs: 200 },
    lyingFlushMs: 200,
  },
};

/**
 * @typedef {{ cuts: number, torn: number, tornFiles: Record<string, number>, undoneWrites: number, keptWrites: number, undoneEntries: number, keptEntries: number,
 *             fsyncEios: number, enospcs: number,
 *             keysConfirmed: number, keysLost: string[], errors: string[] }} CutTally
 *   `tornFiles`: which files the torn writes were in; `keysConfirmed`: key changes the CLI confirmed
 *   before a cut; `keysLost`: those a cut undid.
 */

/** The data directory under the disk's mount: made by the gateway's first start. */
const DATA_DIR = join('site', 'data');

/**
 * A powercut-fs disk as the crash rounds' storage.
 * @param {{ model?: DiskModel, entries?: 'per-directory' | 'ext4', bundlePath?: string }} [options]
 *   `bundlePath`: the gateway whose CLI changes the key file during the rounds (none without it)
 * @returns {Promise<import('../lib/crash-consistency.mjs').CrashStorage & { tally: CutTally, settle: () => Promise<void> }>}
 */
export async function powerCutStorage({ model = /** @type {DiskModel} */ (DISK_MODELS.tear), entries = 'per-directory', bundlePath } = {}) {
  const disk = await createPowercutDisk({ entries, ...model.faults, seed: Math.floor(Math.random() * 2 ** 32) });
  /** @type {CutTally} */
  const tally = {
    cuts: 0,
    torn: 0,
    tornFiles: {},
    undoneWrites: 0,
    keptWrites: 0,
    undoneEntries: 0,
    keptEntries: 0,
    fsyncEios: 0,
    enospcs: 0,
    keysConfirmed: 0,
    keysLost: [],
    errors: [],
  };
  /** @type {import('../lib/powercut-fs.mjs').PowercutMount | undefined} */
  let mounted;
  const technician = keyTechnician(bundlePath);
  return {
    tally,
    async open() {
      mounted ??= await disk.mount();
      const dataDir = join(mounted.mountPoint, DATA_DIR);
      technician.during(dataDir);
      return dataDir;
    },
    async afterKill(random) {
      const fs = /** @type {import('../lib/powercut-fs.mjs').PowercutMount} */ (mounted);
      const confirmed = technician.confirmed(model.lyingFlushMs ?? 0);
      const report = await fs.cut({ model: model.cut(random), seed: Math.floor(random() * 2 ** 32) });
      await technician.stopped();
      await fs.unmount();
      mounted = undefined;
      tally.cuts += 1;
      if (report.torn) {
        tally.torn += 1;
        const file = basename(/** @type {string} */ (report.torn.split(':')[0]));
        tally.tornFiles[file] = (tally.tornFiles[file] ?? 0) + 1;
      }
      tally.undoneWrites += report.writes + report.resizes;
      tally.keptWrites += report.kept;
      tally.undoneEntries += report.entries;
      tally.keptEntries += report.keptEntries;
      tally.fsyncEios += report.fsyncEios;
      tally.enospcs += report.enospcs;
      tally.errors.push(...(report.errors ?? []));
      tally.keysConfirmed += confirmed.length;
      tally.keysLost.push(...lostKeyChanges(join(disk.backing, DATA_DIR, 'api-keys'), confirmed));
    },
    /** Once the gateway stopped: everything written so far reaches the disk, then unmount. */
    async settle() {
      await technician.stopped();
      const fs = /** @type {import('../lib/powercut-fs.mjs').PowercutMount} */ (mounted);
      await fs.writeBack();
      await fs.unmount();
      mounted = undefined;
    },
    async close() {
      await technician.stopped();
      await disk.remove();
    },
  };
}

/** @typedef {{ change: 'add' | 'revoke', name: string }} KeyChange */

/**
 * A technician changing device keys with the CLI while the gateway runs: each round adds a key at
 * a random moment, and every third one revokes the oldest key instead.
 * @param {string | undefined} bundlePath
 */
function keyTechnician(bundlePath) {
  /** @type {string[]} */
  const keys = [];
  let round = 0;
  /** @type {{ change: KeyChange, exited: Promise<unknown>, confirmedAt: number | undefined } | undefined} */
  let running;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const run = (/** @type {KeyChange} */ change, /** @type {string} */ dataDir) => {
    const child = spawn(process.execPath, [/** @type {string} */ (bundlePath), 'keys', change.change, change.name], {
      env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir },
      stdio: 'ignore',
    });
    const current = {
      change,
      exited: new Promise((resolve) => child.once('exit', resolve)),
      confirmedAt: /** @type {number | undefined} */ (undefined),
    };
    running = current;
    child.once('exit', (code) => {
      if (code !== 0) return;
      current.confirmedAt = Date.now();
      if (change.change === 'add') keys.push(change.name);
      else keys.splice(keys.indexOf(change.name), 1);
    });
  };
  return {
    /** Starts the round's key change at a random moment, 0 to 500 ms into the round. @param {string} dataDir */
    during(dataDir) {
      if (bundlePath === undefined || timer !== undefined || running !== undefined) return;
      round += 1;
      /** @type {KeyChange} */
      const change =
        round % 3 === 0 && keys.length > 0
          ? { change: 'revoke', name: /** @type {string} */ (keys[0]) }
          : { change: 'add', name: `site-key-${round}` };
      timer = setTimeout(() => {
        timer = undefined;
        run(change, dataDir);
      }, Math.random() * 500);
    },
    /**
     * The key change the CLI confirmed (exited 0) this round at least `graceMs` before now.
     * @param {number} graceMs @returns {KeyChange[]}
     */
    confirmed(graceMs) {
      clearTimeout(timer);
      timer = undefined;
      const at = running?.confirmedAt;
      return running !== undefined && at !== undefined && Date.now() - at >= graceMs ? [running.change] : [];
    },
    /** Waits for a key change still running (after a cut it fails on the dead disk) to end. */
    async stopped() {
      clearTimeout(timer);
      timer = undefined;
      await running?.exited;
      running = undefined;
    },
  };
}

/**
 * The confirmed key changes a cut undid: a key added and missing, or revoked and back.
 * @param {string} keyFile @param {KeyChange[]} confirmed @returns {string[]}
 */
function lostKeyChanges(keyFile, confirmed) {
  let names = /** @type {Set<string>} */ (new Set());
  try {
    names = new Set(
      readFileSync(keyFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('#'))
        .map((line) => /** @type {string} */ (line.split(' ')[0])),
    );
  } catch (error) {
    if (/** @type {NodeJS.ErrnoException} */ (error).code !== 'ENOENT') throw error;
  }
  return confirmed.filter(({ change, name }) => names.has(name) !== (change === 'add')).map(({ change, name }) => `${change} ${name}`);
}

/**
 * A crash report for the log: how many were lost, and the first few keys of each kind of wrong.
 * @param {import('../lib/crash-consistency.mjs').CrashReport} report
 */
export function briefly(report) {
  return {
    ...report,
    lost: report.missing.length,
    missing: report.missing.slice(0, 5),
    forbidden: report.forbidden.slice(0, 5),
    strangers: report.strangers.slice(0, 5),
  };
}

/**
 * Runs `cuts` power cuts per durability mode on each disk model and says whether each met its
 * promise.
 * @param {{ cuts: number, questdbUrl: string, bundlePath: string, clients?: number, models?: string[],
 *           entries?: 'per-directory' | 'ext4', modes?: ('process-crash' | 'power-loss')[], log: (line: string) => void }} options
 * @returns {Promise<boolean>} true when every model and mode passed
 */
export async function runPowerCuts({
  cuts,
  questdbUrl,
  bundlePath,
  clients = 6,
  models = ['tear'],
  entries = 'per-directory',
  modes = ['process-crash', 'power-loss'],
  log,
}) {
  let passed = true;
  for (const name of models) {
    const model = DISK_MODELS[name];
    if (model === undefined) throw new Error(`no disk model ${name}; the models are ${Object.keys(DISK_MODELS).join(', ')}`);
    for (const durability of modes) {
      const started = Date.now();
      const storage = await powerCutStorage({ model, entries, bundlePath });
      log(`power cuts, model ${name} (${model.about}), entries ${entries}, ${durability}`);
      const report = await runCrashConsistency({
        rounds: durability === 'process-crash' ? cuts * (model.lossProofCuts ?? 1) : cuts,
        durability,
        questdbUrl,
        bundlePath,
        clients,
        storage,
        log,
        gracefulStops: 0.25,
        // A short stop, so most SIGTERM rounds close the queue (and delete its WAL files) before
        // the SIGKILL that follows within 2 s; by default the sinks drain for up to 10 s first.
        gatewayEnv: { SHUTDOWN_TIMEOUT_MS: '500' },
        ioFaults: model.ioFaults ?? false,
      });
      const wrong =
        report.forbidden.length + report.strangers.length + report.duplicates + storage.tally.errors.length + storage.tally.keysLost.length;
      // A lying disk loses what it acknowledged within its delay before the cut, and nothing older.
      const keptPromise = model.lyingFlushMs === undefined ? report.missing.length === 0 : report.lossWindowMs < model.lyingFlushMs;
      // The proof that the cuts bite: without fsync at each commit, answered readings are lost.
      const ok = wrong === 0 && (durability === 'power-loss' ? keptPromise : report.missing.length > 0);
      const summary = {
        ...briefly(report),
        ...storage.tally,
        keysLost: storage.tally.keysLost.slice(0, 5),
        errors: storage.tally.errors.slice(0, 5),
        seconds: Math.round((Date.now() - started) / 1000),
      };
      const expectation =
        durability === 'process-crash'
          ? 'some lost'
          : model.lyingFlushMs === undefined
            ? '0 lost'
            : `none answered ${model.lyingFlushMs} ms or more before the cut lost`;
      log(
        `power cuts, model ${name}, entries ${entries}, ${durability} (expect ${expectation}): ${ok ? 'PASS' : 'FAIL'} ${JSON.stringify(summary)}`,
      );
      passed &&= ok;
    }
  }
  return passed;
}
