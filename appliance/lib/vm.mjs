// The emulated board of the boot and update tests: a card image in qemu's generic arm64 machine,
// started by U-Boot (Debian's qemu_arm64 build) that runs the card's own boot script, so the slot
// choice, the kernels and everything after them are the card's. A Raspberry Pi is not emulated.
//
// The tests run in a network namespace of their own (inNetworkNamespace): the machine's user-mode
// network reaches the host at 10.0.2.2, which is the namespace's loopback, and nothing else, so
// whatever the board tries to reach (time servers, the central tier) is only what the test serves.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { output, run } from './host.mjs';
import { PARTITIONS } from './image.mjs';

export const UBOOT = '/usr/lib/u-boot/qemu_arm64/u-boot.bin';
/** The host as the board sees it on qemu's user-mode network. */
export const HOST_FROM_GUEST = '10.0.2.2';
/** Debian packages the emulated board needs on the host. */
export const VM_HOST_PACKAGES = {
  'qemu-system-aarch64': 'qemu-system-arm',
  [UBOOT]: 'u-boot-qemu',
  mcopy: 'mtools',
  sfdisk: 'fdisk',
  debugfs: 'e2fsprogs',
  unshare: 'util-linux',
  ip: 'iproute2',
};

/**
 * Runs this script again inside a new network namespace with only a loopback interface, unless it
 * already is. Returns true in the namespace; in the parent it waits and exits with the child's status.
 */
export function inNetworkNamespace() {
  if (process.env['HARBOR_VM_NETNS'] === '1') {
    run('ip', ['link', 'set', 'lo', 'up']);
    return true;
  }
  const result = spawnSync('unshare', ['--net', '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, HARBOR_VM_NETNS: '1' },
  });
  process.exit(result.status ?? 1);
}

/** @typedef {{ start: number, size: number }} Partition */

/** The card's partitions, by the layout's names. */
export function partitions(/** @type {string} */ disk) {
  /** @type {{ partitiontable: { partitions: Partition[] } }} */
  const table = JSON.parse(output('sfdisk', ['--json', disk]));
  const list = table.partitiontable.partitions;
  if (list.length !== 4) throw new Error(`${disk} has ${list.length} partitions, not the A/B card's 4`);
  const at = (/** @type {number} */ n) => /** @type {Partition} */ (list[n - 1]);
  return { boot: at(PARTITIONS.boot), rootA: at(PARTITIONS.rootA), rootB: at(PARTITIONS.rootB), data: at(PARTITIONS.data) };
}

/** mtools' name for the FAT boot partition inside the disk image. */
export const fat = (/** @type {string} */ disk, /** @type {Partition} */ part) => `${disk}@@${part.start * 512}`;

/** A file of the boot partition, or undefined. */
export function readBootFile(/** @type {string} */ disk, /** @type {Partition} */ part, /** @type {string} */ name) {
  const result = spawnSync('mtype', ['-i', fat(disk, part), `::/${name}`], { encoding: 'latin1' });
  return result.status === 0 ? result.stdout : undefined;
}

export function bootFiles(/** @type {string} */ disk, /** @type {Partition} */ part) {
  return output('mdir', ['-b', '-i', fat(disk, part), '::/'])
    .split('\n')
    .map((line) => line.replace('::/', ''));
}

export function writeBootFile(
  /** @type {string} */ disk,
  /** @type {Partition} */ part,
  /** @type {string} */ file,
  /** @type {string} */ name,
) {
  run('mcopy', ['-o', '-i', fat(disk, part), file, `::/${name}`]);
}

/** A file of an ext4 partition, read in place; undefined when it is not there. */
export function readPartitionFile(/** @type {string} */ disk, /** @type {Partition} */ part, /** @type {string} */ path) {
  const result = spawnSync('debugfs', ['-R', `cat ${path}`, `${disk}?offset=${part.start * 512}`], { encoding: 'utf8' });
  return result.status === 0 && !/File not found|not found by ext2_lookup/.test(result.stderr) ? result.stdout : undefined;
}

/**
 * Runs debugfs requests writing to an ext4 partition of the disk image, in place. The journal is
 * replayed first: after a power cut it holds transactions the next mount would replay over the
 * edits, undoing them.
 * @param {string} disk
 * @param {Partition} part
 * @param {string[]} requests
 */
export function editPartition(disk, part, requests) {
  for (const request of ['journal_run', ...requests])
    spawnSync('debugfs', ['-w', '-R', request, `${disk}?offset=${part.start * 512}`], { stdio: 'ignore' });
}

/**
 * What the tests change on a system slot for the emulated board (debugfs requests, files in work):
 * - the journal is copied to the serial console, so a test that fails shows why in its console log
 *   (the card keeps its journal in RAM only);
 * - the gateway's watchdog waits 5 minutes instead of 30 s: under full emulation on a shared
 *   machine the board's CPUs go unscheduled for longer than 30 s, and systemd then kills a gateway
 *   that is only slow (as the hardware watchdog is left out, see bootMachine).
 */
export function emulatedBoardDropIns(/** @type {string} */ work) {
  const journal = join(work, 'journal-console.conf');
  writeFileSync(journal, '[Journal]\nForwardToConsole=yes\nTTYPath=/dev/ttyAMA0\nMaxLevelConsole=info\n');
  const watchdog = join(work, 'gateway-watchdog.conf');
  writeFileSync(watchdog, '[Service]\nWatchdogSec=5min\n');
  return [
    `write ${journal} /etc/systemd/journald.conf.d/90-emulated-board.conf`,
    'mkdir /etc/systemd/system/harbor-gateway.service.d',
    `write ${watchdog} /etc/systemd/system/harbor-gateway.service.d/90-emulated-board.conf`,
  ];
}

/** Writes emulatedBoardDropIns onto a card's system slot before it boots. */
export function instrumentSlot(/** @type {string} */ disk, /** @type {Partition} */ part, /** @type {string} */ work) {
  editPartition(disk, part, emulatedBoardDropIns(work));
  const written = readPartitionFile(disk, part, '/etc/systemd/system/harbor-gateway.service.d/90-emulated-board.conf');
  if (written === undefined || !written.includes('WatchdogSec'))
    throw new Error('could not write the emulated board drop-ins onto the slot');
}

/** SHA-256 of a partition's bytes: whether anything wrote to it. */
export function partitionDigest(/** @type {string} */ disk, /** @type {Partition} */ part) {
  return output('sh', [
    '-c',
    `dd if=${disk} bs=1M iflag=skip_bytes,count_bytes skip=${part.start * 512} count=${part.size * 512} status=none | sha256sum`,
  ]).split(' ')[0];
}

/**
 * @typedef {object} Machine
 * @property {string} serial      the console log's path
 * @property {Promise<void>} exited
 * @property {() => void} cut     power cut: the machine is killed where it stands
 * @property {() => string} console  the console so far, without colour codes
 * @property {(pattern: RegExp, timeoutMs: number, what: string) => Promise<RegExpMatchArray>} waitFor
 *   waits for the console to show pattern (searched from the position of the last match on)
 */

/** Machines still running: a test that stops, passed or failed, leaves none behind. */
const running = new Set();
process.once('exit', () => {
  for (const machine of running) machine.kill('SIGKILL');
});
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) process.once(signal, () => process.exit(1));

/** The address qemu's user-mode network gives the board by DHCP. */
export const GUEST_DHCP_ADDRESS = '10.0.2.15';

/**
 * Boots the disk. Ports of the board are forwarded from the namespace's loopback, to the board's
 * DHCP address unless `guest` names the one it was given instead.
 * @param {{ disk: string, serial: string, forwards: Record<string, number>, work: string, guest?: string }} options
 *   forwards: host port -> board port
 * @returns {Machine}
 */
export function bootMachine({ disk, serial, forwards, work, guest = GUEST_DHCP_ADDRESS }) {
  rmSync(serial, { force: true });
  const hostfwd = Object.entries(forwards)
    .map(([host, port]) => `,hostfwd=tcp:127.0.0.1:${host}-${guest}:${port}`)
    .join('');
  const log = openSync(join(work, 'qemu.log'), 'a');
  const machine = spawn(
    'nice',
    [
      '-n',
      '10',
      'qemu-system-aarch64',
      '-M',
      'virt',
      '-cpu',
      'cortex-a72',
      '-smp',
      '2',
      '-m',
      '2048',
      '-nographic',
      '-monitor',
      'none',
      '-bios',
      UBOOT,
      '-drive',
      `file=${disk},format=raw,if=none,id=disk`,
      '-device',
      'virtio-blk-device,drive=disk',
      '-netdev',
      `user,id=net${hostfwd}`,
      '-device',
      'virtio-net-device,netdev=net',
      // No hardware watchdog: on a shared machine the emulated board's PID 1 can go unscheduled for
      // longer than systemd's 60 s watchdog, which then resets a board that is only slow.
      '-serial',
      `file:${serial}`,
    ],
    { stdio: ['ignore', log, log] },
  );
  closeSync(log);
  running.add(machine);
  machine.once('exit', () => running.delete(machine));
  const exited = new Promise((resolveExit) => machine.once('exit', () => resolveExit(undefined)));
  const consoleText = () => (existsSync(serial) ? stripVTControlCharacters(readFileSync(serial, 'latin1')) : '');
  let from = 0;
  return {
    serial,
    exited: /** @type {Promise<void>} */ (exited),
    cut: () => {
      // nice execs qemu, so the pid is qemu's.
      machine.kill('SIGKILL');
    },
    console: consoleText,
    waitFor: async (pattern, timeoutMs, what) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const text = consoleText();
        const rest = text.slice(from);
        const match = rest.match(pattern);
        if (match !== null) {
          from += (match.index ?? 0) + match[0].length;
          return match;
        }
        if (machine.exitCode !== null || machine.signalCode !== null)
          throw new Error(`the machine stopped while waiting for ${what}; console: ${serial}`);
        if (Date.now() > deadline) throw new Error(`no ${what} within ${Math.round(timeoutMs / 1000)} s; console: ${serial}`);
        await new Promise((r) => setTimeout(r, 1000));
      }
    },
  };
}

/** Polls an address until it answers 2xx; the seconds it took. */
export async function waitForHttp(/** @type {string} */ url, /** @type {number} */ timeoutMs, /** @type {Machine} */ machine) {
  const started = Date.now();
  for (;;) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(5000) })).ok) return Math.round((Date.now() - started) / 1000);
    } catch {
      // still booting
    }
    if (Date.now() - started > timeoutMs)
      throw new Error(`${url} did not answer within ${Math.round(timeoutMs / 1000)} s; console: ${machine.serial}`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}
