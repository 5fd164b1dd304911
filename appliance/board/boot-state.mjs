#!/usr/bin/node
// Which root slot boots: the two files on the boot partition that the boot script
// (appliance/boot/boot.cmd) reads, and RAUC's custom boot loader backend that writes them
// (system.conf: bootloader=custom, bootloader-custom-backend=boot-state.sh, which answers the
// reads itself and hands the writes to this file):
//   boot-state.mjs get-primary | set-primary SLOT | get-state SLOT | set-state SLOT good|bad | get-current
// harbor-slot.env names the committed slot and changes only when a trial is confirmed; harbor-try.env
// names a slot on trial and the attempts it has left. Each is written whole (temporary file, fsync,
// rename), so a power cut leaves the old or the new file; the boot script takes a damaged one as
// "no trial" or "slot A".
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeAtomic } from './files.mjs';

export const BOOT_DIR = '/boot/firmware';
export const SLOT_FILE = 'harbor-slot.env';
export const TRY_FILE = 'harbor-try.env';
/** Boots a new slot may try before the boot script returns to the committed one: one, as tryboot. */
export const TRIAL_ATTEMPTS = 1;
export const SLOTS = /** @type {const} */ (['A', 'B']);

/** @typedef {'A' | 'B'} Slot */
/** @typedef {{ slot: Slot, trySlot: Slot | undefined, tryLeft: number }} BootState */

const isSlot = (/** @type {unknown} */ value) => value === 'A' || value === 'B';

/** ASCII white space only, as boot-state.sh's [[:space:]] in the C locale: not String.trim()'s no-break space. */
const trimAscii = (/** @type {string} */ text) => text.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, '');

/** KEY=value lines as U-Boot's `env export -t` writes them (NUL padding ignored). */
export function parseEnvFile(/** @type {string} */ text) {
  /** @type {Record<string, string>} */
  const values = {};
  for (const line of text.replace(/\0/g, '').split(/\r?\n/)) {
    const at = line.indexOf('=');
    if (at > 0) values[trimAscii(line.slice(0, at))] = trimAscii(line.slice(at + 1));
  }
  return values;
}

const readIfThere = (/** @type {string} */ path) => (existsSync(path) ? readFileSync(path, 'latin1') : '');

/** The boot partition's state, read as the boot script reads it. */
export function readBootState(boot = BOOT_DIR) {
  const committed = parseEnvFile(readIfThere(join(boot, SLOT_FILE)))['HARBOR_SLOT'];
  const trial = parseEnvFile(readIfThere(join(boot, TRY_FILE)));
  const left = Number.parseInt(trial['HARBOR_TRY_LEFT'] ?? '0', 16);
  return /** @type {BootState} */ ({
    slot: isSlot(committed) ? committed : 'A',
    trySlot: isSlot(trial['HARBOR_TRY']) ? trial['HARBOR_TRY'] : undefined,
    tryLeft: Number.isFinite(left) && left > 0 ? left : 0,
  });
}

export function writeCommitted(/** @type {Slot} */ slot, boot = BOOT_DIR) {
  writeAtomic(join(boot, SLOT_FILE), `HARBOR_SLOT=${slot}\n`);
}

/** A trial of `slot` for `attempts` boots; no slot: no trial. */
export function writeTrial(/** @type {Slot | undefined} */ slot, attempts = TRIAL_ATTEMPTS, boot = BOOT_DIR) {
  writeAtomic(
    join(boot, TRY_FILE),
    slot === undefined ? 'HARBOR_TRY=\nHARBOR_TRY_LEFT=0\n' : `HARBOR_TRY=${slot}\nHARBOR_TRY_LEFT=${attempts}\n`,
  );
}

/** What the kernel was started with: the slot (rauc.slot=) and whether this boot is a trial. */
export function bootedSlot(cmdline = readIfThere('/proc/cmdline')) {
  const slot = /(?:^|\s)rauc\.slot=([AB])(?:\s|$)/.exec(cmdline)?.[1];
  return { slot: /** @type {Slot | undefined} */ (slot), trial: /(?:^|\s)harbor\.trial=1(?:\s|$)/.test(cmdline) };
}

/**
 * RAUC's custom backend, on the given state. Returns what to print.
 * @param {string[]} args
 * @param {{ boot?: string, cmdline?: string }} [where]
 */
export function backend(args, where = {}) {
  const boot = where.boot ?? BOOT_DIR;
  const [command, name, value] = args;
  const state = readBootState(boot);
  const booted = bootedSlot(where.cmdline).slot;
  const slotArg = () => {
    if (!isSlot(name)) throw new Error(`${command} needs a slot, A or B (got ${name})`);
    return /** @type {Slot} */ (name);
  };
  switch (command) {
    case 'get-primary':
      // The slot the next boot starts: a trial with attempts left, else the committed one.
      return state.trySlot !== undefined && state.tryLeft > 0 ? state.trySlot : state.slot;
    case 'get-current':
      if (booted === undefined) throw new Error('the kernel command line names no rauc.slot');
      return booted;
    case 'set-primary': {
      const slot = slotArg();
      if (slot === state.slot) writeTrial(undefined, 0, boot);
      else writeTrial(slot, TRIAL_ATTEMPTS, boot);
      return '';
    }
    case 'get-state': {
      const slot = slotArg();
      // A slot whose trial was spent without being confirmed, while another is committed.
      const spent = slot === state.trySlot && state.tryLeft === 0 && slot !== booted && slot !== state.slot;
      return spent ? 'bad' : 'good';
    }
    case 'set-state': {
      const slot = slotArg();
      if (value === 'good') {
        // Confirming the trial this board runs: it becomes the committed slot.
        if (slot === state.trySlot && slot === booted) {
          writeCommitted(slot, boot);
          writeTrial(undefined, 0, boot);
        } else if (slot !== state.slot && slot !== booted) {
          throw new Error(`slot ${slot} is neither committed nor running; it cannot be marked good`);
        }
        return '';
      }
      if (value === 'bad') {
        if (slot === state.trySlot) writeTrial(undefined, 0, boot);
        return '';
      }
      throw new Error(`set-state takes good or bad (got ${value})`);
    }
    default:
      throw new Error(`unknown command ${command}: get-primary, set-primary, get-state, set-state, get-current`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const cmdlineFile = process.env['HARBOR_CMDLINE_FILE'];
    const out = backend(process.argv.slice(2), {
      boot: process.env['HARBOR_BOOT_DIR'] ?? BOOT_DIR,
      ...(cmdlineFile === undefined ? {} : { cmdline: readIfThere(cmdlineFile) }),
    });
    if (out !== '') process.stdout.write(`${out}\n`);
  } catch (error) {
    process.stderr.write(`boot-state: ${/** @type {Error} */ (error).message}\n`);
    process.exitCode = 1;
  }
}
