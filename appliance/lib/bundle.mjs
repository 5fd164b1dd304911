// The RAUC update bundle of a release: the root slot's ext4 image, a hook, and a manifest, signed
// with the release signing key (signing.mjs). dm-verity format: the board checks the signature
// before it reads anything, and every block against the signed hash tree as it writes the slot.
import { linkSync, mkdirSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { COMPATIBLE } from '../board/rauc.mjs';
import { run } from './host.mjs';

/**
 * After RAUC wrote and mounted the new slot: the card's machine id goes with it, so the board keeps
 * its DHCP identity and name across slots. Everything else a site set lives on the data partition.
 */
const HOOK = `#!/bin/sh
# Harbor Gateway update bundle hook, run by RAUC on the board that installs the bundle.
set -eu
case "$1" in
  slot-post-install)
    [ "$RAUC_SLOT_CLASS" = rootfs ] || exit 0
    if [ -s /etc/machine-id ]; then
      cp /etc/machine-id "$RAUC_SLOT_MOUNT_POINT/etc/machine-id"
    fi
    ;;
esac
`;

/**
 * @param {{ rootImage: string, bundle: string, version: string, description: string, build: string,
 *   signing: import('./signing.mjs').Signing, work: string }} options
 */
export function makeBundle({ rootImage, bundle, version, description, build, signing, work }) {
  const content = join(work, 'bundle-content');
  rmSync(content, { recursive: true, force: true });
  mkdirSync(content, { recursive: true });
  linkSync(rootImage, join(content, 'rootfs.ext4'));
  writeFileSync(join(content, 'hook.sh'), HOOK);
  chmodSync(join(content, 'hook.sh'), 0o755);
  writeFileSync(join(content, 'manifest.raucm'), manifestText({ version, description, build, hook: true }));
  signBundle({ content, bundle, signing });
  rmSync(content, { recursive: true, force: true });
  return bundle;
}

/**
 * The manifest of a bundle for this board: one root slot image in a verity bundle, with the hook
 * (hook.sh beside it) when asked.
 * @param {{ version: string, description: string, build?: string, hook?: boolean }} options
 */
export function manifestText({ version, description, build, hook = false }) {
  return [
    '[update]',
    `compatible=${COMPATIBLE}`,
    `version=${version}`,
    `description=${description}`,
    ...(build === undefined ? [] : [`build=${build}`]),
    '',
    '[bundle]',
    'format=verity',
    '',
    ...(hook ? ['[hooks]', 'filename=hook.sh', ''] : []),
    '[image.rootfs]',
    'filename=rootfs.ext4',
    ...(hook ? ['hooks=post-install'] : []),
    '',
  ].join('\n');
}

/**
 * Makes and signs a bundle of a content folder (manifest.raucm and its images).
 * @param {{ content: string, bundle: string, signing: import('./signing.mjs').Signing }} options
 */
export function signBundle({ content, bundle, signing }) {
  // zstd: xz made a 299 MiB bundle but took 31 minutes on the loaded two-core build machine; the
  // board's kernel reads both, zstd faster.
  rmSync(bundle, { force: true });
  run(
    'rauc',
    [
      'bundle',
      `--cert=${signing.cert}`,
      `--key=${signing.key}`,
      `--keyring=${signing.keyring}`,
      '--mksquashfs-args=-comp zstd -b 1M -no-progress',
      content,
      bundle,
    ],
    { quiet: true },
  );
  return bundle;
}
