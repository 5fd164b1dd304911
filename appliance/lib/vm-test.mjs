// What the boot and update tests share around their boards: their log lines and checks, the host's
// tools, what is built before the network namespace (builds fetch), the namespace itself, a work
// folder of their own, and the closing line that says passed or FAILED with the figures.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { applianceCache, ensureHostPackages, requireRoot, stopwatch } from './host.mjs';
import { VM_HOST_PACKAGES, inNetworkNamespace } from './vm.mjs';

/**
 * Starts a test of the emulated board named `appliance:<name>`: as root, with the host's tools,
 * `prepare` run outside the network namespace, the rest of the script inside it.
 * @param {{ name: string, prepare: () => void }} options
 */
export function startVmTest({ name, prepare }) {
  const elapsed = stopwatch();
  const say = (/** @type {string} */ message) => process.stdout.write(`[appliance:${name} ${elapsed().toFixed(0)} s] ${message}\n`);
  const expect = (/** @type {boolean} */ condition, /** @type {string} */ message) => {
    if (!condition) throw new Error(message);
  };
  requireRoot('run the emulated board');
  if (process.env['HARBOR_VM_NETNS'] !== '1') {
    ensureHostPackages({ ...VM_HOST_PACKAGES, rauc: 'rauc', mksquashfs: 'squashfs-tools', openssl: 'openssl' });
    prepare();
  }
  inNetworkNamespace();
  mkdirSync(applianceCache(), { recursive: true });
  const work = mkdtempSync(join(applianceCache(), `${name}-`));
  /** @type {string[]} */
  const timings = [];
  /**
   * Runs the test's body and exits: passed, or FAILED with the reason and the consoles kept.
   * @param {() => Promise<void>} body
   * @param {() => void} [cleanup]
   */
  const runTest = async (body, cleanup = () => {}) => {
    let failed = true;
    try {
      await body();
      failed = false;
    } catch (error) {
      // process.exit below would otherwise drop the reason.
      process.stdout.write(`${/** @type {Error} */ (error).stack ?? error}\n`);
    } finally {
      cleanup();
      process.stdout.write(`appliance:${name} ${failed ? 'FAILED' : 'passed'} in ${elapsed().toFixed(0)} s\n${timings.join('\n')}\n`);
      if (failed) process.stdout.write(`consoles kept in ${work}\n`);
      else rmSync(work, { recursive: true, force: true });
      process.exit(failed ? 1 : 0);
    }
  };
  return { say, expect, work, timings, runTest, elapsed };
}
