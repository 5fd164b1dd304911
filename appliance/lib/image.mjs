// The card's layout and its assembly from file system images made with mkfs -d and mtools, without
// loop devices:
//   1 HARBOR-BOOT  FAT32   firmware, U-Boot, boot.scr, the slot files, harbor.conf   (shared)
//   2 root A       ext4    a release's root                                          (slot A)
//   3 root B       ext4    empty on a new card; the first update writes it           (slot B)
//   4 harbor-var   ext4    /var: queue, QuestDB, keys, certificates, settings        (shared)
// An update writes only the other root slot; the boot partition's slot files say which boots.
// MBR, as the Raspberry Pi firmware reads it; 4 MiB alignment keeps the card's erase blocks whole.
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { digest } from './debian.mjs';
import { output, run } from './host.mjs';

const MIB = 1024 * 1024;
/** Room for the firmware, U-Boot, and an update bundle a technician copies there. */
export const BOOT_MIB = 1024;
/** Each root slot; a release's root must fit (about 1 GiB now), with room for the ones to come. */
export const SLOT_MIB = 3072;
export const PARTITIONS = { boot: 1, rootA: 2, rootB: 3, data: 4 };

/** MiB a tree takes, rounded up. */
export const usedMiB = (/** @type {string} */ dir) => Math.ceil(Number(output('du', ['-sb', dir]).split('\t')[0]) / MIB);

/**
 * An ext4 image of a tree, with identifiers derived from `seed` so that the same inputs give the
 * same bytes. 4 KiB blocks although the file system starts small: /var grows to the whole card.
 * @param {{ tree: string, file: string, label: string, mib: number, seed: unknown, epoch: string }} options
 */
export function ext4Image({ tree, file, label, mib, seed, epoch }) {
  rmSync(file, { force: true });
  run(
    'mkfs.ext4',
    [
      '-q',
      '-F',
      '-b',
      '4096',
      '-L',
      label,
      '-U',
      uuid({ seed, label }),
      '-E',
      `hash_seed=${uuid({ seed, label, hash: true })},root_owner=0:0`,
      '-d',
      tree,
      file,
      `${mib}M`,
    ],
    { env: { ...process.env, E2FSPROGS_FAKE_TIME: epoch, SOURCE_DATE_EPOCH: epoch } },
  );
  return file;
}

/** A version-4-shaped UUID from a digest of what it names. */
function uuid(/** @type {unknown} */ seed) {
  const hex = digest({ seed, n: 0 }) + digest({ seed, n: 1 }) + digest({ seed, n: 2 });
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The FAT boot partition from a tree.
 * @param {{ tree: string, file: string, epoch: string }} options
 */
export function bootImage({ tree, file, epoch }) {
  rmSync(file, { force: true });
  run('mkfs.vfat', ['-F', '32', '-n', 'HARBOR-BOOT', '--invariant', '-C', file, String(BOOT_MIB * 1024)], { quiet: true });
  const entries = readdirSync(tree).map((entry) => join(tree, entry));
  run('mcopy', ['-s', '-p', '-m', '-i', file, ...entries, '::/'], { env: { ...process.env, SOURCE_DATE_EPOCH: epoch } });
  return file;
}

/**
 * Writes the card image: the boot partition, root A from its ext4 image, an empty slot B, and /var.
 * @param {{ image: string, boot: string, root: string, rootMiB: number, data: string, dataMiB: number, diskId: string, work: string }} options
 */
export function writeCard({ image, boot, root, rootMiB, data, dataMiB, diskId, work }) {
  if (rootMiB > SLOT_MIB) throw new Error(`the root needs ${rootMiB} MiB, more than a slot's ${SLOT_MIB} MiB`);
  const bootStart = 4;
  const slotA = bootStart + BOOT_MIB;
  const slotB = slotA + SLOT_MIB;
  const dataStart = slotB + SLOT_MIB;
  rmSync(image, { force: true });
  run('truncate', ['-s', `${dataStart + dataMiB}M`, image]);
  const sectors = (/** @type {number} */ mib) => mib * 2048;
  const table = [
    'label: dos',
    `label-id: 0x${diskId}`,
    `start=${sectors(bootStart)}, size=${sectors(BOOT_MIB)}, type=c, bootable`,
    `start=${sectors(slotA)}, size=${sectors(SLOT_MIB)}, type=83`,
    `start=${sectors(slotB)}, size=${sectors(SLOT_MIB)}, type=83`,
    `start=${sectors(dataStart)}, size=${sectors(dataMiB)}, type=83`,
    '',
  ].join('\n');
  const tableFile = join(work, 'table.sfdisk');
  writeFileSync(tableFile, table);
  run('sh', ['-c', `sfdisk --quiet ${image} < ${tableFile}`]);
  for (const [file, start] of /** @type {const} */ ([
    [boot, bootStart],
    [root, slotA],
    [data, dataStart],
  ])) {
    run('dd', [`if=${file}`, `of=${image}`, 'bs=1M', `seek=${start}`, 'conv=notrunc,sparse', 'status=none']);
  }
  return image;
}

/** Files of the boot tree that make a card boot; the build refuses an image without them. */
export function checkBootTree(/** @type {string} */ tree) {
  const names = readdirSync(tree);
  for (const needed of ['boot.scr', 'harbor-slot.env', 'harbor-try.env'])
    if (!names.includes(needed)) throw new Error(`${needed} is missing from the boot partition`);
  if (!names.some((name) => /\.dtb$/.test(name))) throw new Error('no device tree on the boot partition: a Raspberry Pi would not boot');
  return names.map((name) => basename(name));
}
