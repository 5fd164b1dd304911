// Power cuts: the crash-consistency rounds with the gateway's data directory on powercut-fs. After
// each kill -9 everything the gateway had not fsynced is dropped (half the cuts also tear the newest
// unsynced write), the file system is unmounted and mounted again, and the next round restarts the
// gateway on what survived.
//
// power-loss mode must deliver every reading answered 2xx exactly once. process-crash mode must
// lose some: that proves the cuts bite, and measures how far back an answered reading can be lost.
import { createPowercutDisk } from '../lib/powercut-fs.mjs';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';

/**
 * @typedef {{ cuts: number, torn: number, undoneWrites: number, undoneEntries: number, errors: string[] }} CutTally
 */

/**
 * A powercut-fs disk as the crash rounds' storage.
 * @returns {Promise<import('../lib/crash-consistency.mjs').CrashStorage & { tally: CutTally, settle: () => Promise<void> }>}
 */
export async function powerCutStorage() {
  const disk = await createPowercutDisk();
  /** @type {CutTally} */
  const tally = { cuts: 0, torn: 0, undoneWrites: 0, undoneEntries: 0, errors: [] };
  /** @type {import('../lib/powercut-fs.mjs').PowercutMount | undefined} */
  let mounted;
  return {
    tally,
    async open() {
      mounted = await disk.mount();
      return mounted.mountPoint;
    },
    async afterKill(random) {
      const fs = /** @type {import('../lib/powercut-fs.mjs').PowercutMount} */ (mounted);
      const report = await fs.cut({ model: random() < 0.5 ? 'tear' : 'drop', seed: Math.floor(random() * 2 ** 32) });
      await fs.unmount();
      mounted = undefined;
      tally.cuts += 1;
      if (report.torn) tally.torn += 1;
      tally.undoneWrites += report.writes + report.resizes;
      tally.undoneEntries += report.entries;
      tally.errors.push(...(report.errors ?? []));
    },
    /** Once the gateway stopped: everything written so far reaches the disk, then unmount. */
    async settle() {
      const fs = /** @type {import('../lib/powercut-fs.mjs').PowercutMount} */ (mounted);
      await fs.writeBack();
      await fs.unmount();
      mounted = undefined;
    },
    close: () => disk.remove(),
  };
}

/**
 * Runs `cuts` power cuts in each durability mode and says whether each met its promise.
 * @param {{ cuts: number, questdbUrl: string, bundlePath: string, clients?: number, log: (line: string) => void }} options
 * @returns {Promise<boolean>} true when both modes passed
 */
export async function runPowerCuts({ cuts, questdbUrl, bundlePath, clients = 6, log }) {
  let passed = true;
  for (const durability of /** @type {const} */ (['process-crash', 'power-loss'])) {
    const storage = await powerCutStorage();
    const report = await runCrashConsistency({ rounds: cuts, durability, questdbUrl, bundlePath, clients, storage, log });
    const wrong = report.forbidden.length + report.strangers.length + report.duplicates + storage.tally.errors.length;
    // The proof that the cuts bite: without fsync at each commit, answered readings are lost.
    const ok = durability === 'power-loss' ? report.missing.length === 0 && wrong === 0 : report.missing.length > 0 && wrong === 0;
    const summary = {
      ...report,
      lost: report.missing.length,
      missing: report.missing.slice(0, 5),
      forbidden: report.forbidden.slice(0, 5),
      strangers: report.strangers.slice(0, 5),
      ...storage.tally,
      errors: storage.tally.errors.slice(0, 5),
    };
    const expectation = durability === 'power-loss' ? '0 lost' : 'some lost';
    log(`power cuts, ${durability} (expect ${expectation}): ${ok ? 'PASS' : 'FAIL'} ${JSON.stringify(summary)}`);
    passed &&= ok;
  }
  return passed;
}
