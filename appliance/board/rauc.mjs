// RAUC on this card: its configuration, written for the card the board booted from, and the calls
// the updater makes. RAUC's command line talks to rauc.service over D-Bus.
import { existsSync, readFileSync } from 'node:fs';
import { writeAtomic } from './files.mjs';
import { run } from './records.mjs';

export const RAUC_CONF = '/run/harbor-appliance/rauc/system.conf';
export const KEYRING = '/etc/rauc/keyring.pem';
export const COMPATIBLE = 'harbor-gateway-arm64';

/** The card's disk id and the slot partition of `slot`, from root=PARTUUID=<disk>-02|03 on the kernel command line. */
export function slotDevice(/** @type {'A' | 'B'} */ slot, cmdline = readFileSync('/proc/cmdline', 'utf8')) {
  const root = /(?:^|\s)root=PARTUUID=([0-9a-fA-F]{8})-0[23](?:\s|$)/.exec(cmdline);
  if (root === null) throw new Error('the kernel command line has no root=PARTUUID=<disk>-02|03: not booted by the appliance boot script');
  return `/dev/disk/by-partuuid/${String(root[1]).toLowerCase()}-0${slot === 'A' ? 2 : 3}`;
}

/**
 * Writes RAUC's system.conf for this card: its slots are partitions 2 and 3 of the disk the running
 * root is on, named by PARTUUID (the card's own disk id, which an update never changes).
 */
export function raucConfig(cmdline = readFileSync('/proc/cmdline', 'utf8')) {
  return [
    '# Written at each start of rauc.service by harbor-update rauc-config, for the card it runs on.',
    '[system]',
    `compatible=${COMPATIBLE}`,
    'bootloader=custom',
    // Only dm-verity bundles: the payload is checked block by block as it is read.
    'bundle-formats=-plain',
    'data-directory=/var/lib/rauc',
    '',
    '[handlers]',
    'bootloader-custom-backend=/usr/lib/harbor-appliance/boot-state.sh',
    '',
    '[keyring]',
    `path=${KEYRING}`,
    '',
    '[slot.rootfs.0]',
    `device=${slotDevice('A', cmdline)}`,
    'type=ext4',
    'bootname=A',
    '',
    '[slot.rootfs.1]',
    `device=${slotDevice('B', cmdline)}`,
    'type=ext4',
    'bootname=B',
    '',
  ].join('\n');
}

export function writeRaucConfig() {
  const umask = process.umask(0o022);
  try {
    writeAtomic(RAUC_CONF, raucConfig());
  } finally {
    process.umask(umask);
  }
}

/** RAUC with this card's configuration, written first when rauc.service has not run yet this boot. */
export const rauc = (/** @type {string[]} */ args, quiet = false) => {
  if (!existsSync(RAUC_CONF)) writeRaucConfig();
  return run('rauc', [`--conf=${RAUC_CONF}`, ...args], { quiet });
};

/**
 * The bundle's manifest after RAUC has checked its signature against the keyring, or why not.
 * @returns {{ version: string, compatible: string } | { problem: string }}
 */
export function verifiedManifest(/** @type {string} */ bundle) {
  const info = rauc(['info', '--output-format=json', bundle], true);
  if (!info.ok) return { problem: `the bundle's signature or format was refused: ${info.stderr.split('\n').slice(-3).join(' ')}` };
  const manifest = JSON.parse(info.stdout);
  return { version: String(manifest.version ?? ''), compatible: String(manifest.compatible ?? '') };
}
