// The Debian part of the appliance's root: trixie arm64 with its packages installed, their
// maintainer scripts run under qemu-user. It is what takes long (100 minutes on two shared,
// loaded cores) and what every release's image shares, so it is made once per package set and
// sources and kept as a tarball in ~/.cache/harbor-gateway/appliance; the project's own files go
// on top of a copy of it (build.mjs). A package set that only adds packages to a cached one is made
// by installing them on a copy of it (minutes). --refresh bootstraps anew with the archive's
// current packages.
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEBIAN_SOURCES, SUITE, digest } from './debian.mjs';
import { applianceCache, output, run } from './host.mjs';

/** Grafana OSS from Grafana's own apt repository, pinned; its signing key is checked by fingerprint. */
export const GRAFANA_VERSION = process.env['GRAFANA_VERSION'] ?? '13.2.3';
const GRAFANA_SOURCE = 'deb https://apt.grafana.com stable main';
const GRAFANA_KEY = { url: 'https://apt.grafana.com/gpg-full.key', fingerprint: 'B53AE77BADB630A683046005963FA27710458545' };
const RASPBERRYPI_SOURCE = `deb http://archive.raspberrypi.com/debian ${SUITE} main`;
const RASPBERRYPI_KEY = {
  url: 'https://archive.raspberrypi.com/debian/raspberrypi.gpg.key',
  fingerprint: 'CF8A1AF502A2AA2D763BAE7E82B129927FA3303E',
};

const BASE_PACKAGES = [
  'systemd-sysv',
  'systemd-resolved',
  'systemd-timesyncd',
  'udev',
  'dbus',
  'kmod',
  'iproute2',
  'iputils-ping',
  'ca-certificates',
  'tzdata',
  'initramfs-tools',
  'e2fsprogs',
  'dosfstools',
  'fdisk',
  'cloud-guest-utils',
  // The gateway: Debian's Node 20.19 (ABI 115, what better-sqlite3 is cross-built for).
  'nodejs',
  // QuestDB 9.3.4 runs on Java 17 and newer; 21 is the LTS Java of trixie with security support.
  'openjdk-21-jre-headless',
  // Updates over the air: RAUC installs signed bundles into the other root slot (docs/appliance.md);
  // its installer is the D-Bus service of rauc-service.
  'rauc',
  'rauc-service',
];
/**
 * Kernel, firmware and boot loader. U-Boot starts the kernel of the slot its boot script picks
 * (appliance/boot/boot.cmd): Debian's rpi_arm64 build on a Raspberry Pi 4.
 */
const KERNEL_PACKAGES = {
  debian: ['linux-image-arm64', 'raspi-firmware', 'u-boot-rpi'],
  raspberrypi: ['linux-image-rpi-v8', 'linux-image-rpi-2712', 'raspi-firmware', 'u-boot-rpi'],
};

/**
 * @typedef {object} BaseRoot
 * @property {string} tarball     the root as a tar archive
 * @property {string} packages    the installed packages and versions, one `name<TAB>version` a line
 * @property {string} key         digest of what it was made from
 */

/**
 * The cached base root for a kernel variant, made when missing.
 * @param {{ kernel: 'debian' | 'raspberrypi', withGrafana: boolean, refresh?: boolean, say: (message: string) => void }} options
 * @returns {BaseRoot}
 */
export function baseRoot({ kernel, withGrafana, refresh = false, say }) {
  const packages = [...BASE_PACKAGES, ...KERNEL_PACKAGES[kernel], ...(withGrafana ? [`grafana=${GRAFANA_VERSION}`] : [])];
  const sources = [...DEBIAN_SOURCES, ...(withGrafana ? [GRAFANA_SOURCE] : []), ...(kernel === 'raspberrypi' ? [RASPBERRYPI_SOURCE] : [])];
  const key = rootKey(packages, sources);
  const dir = join(applianceCache(), `base-root-${SUITE}-${kernel}-${key}`);
  const tarball = join(dir, 'root.tar');
  const list = join(dir, 'packages.tsv');
  if (refresh) rmSync(dir, { recursive: true, force: true });
  if (existsSync(tarball) && existsSync(list)) return { tarball, packages: list, key };

  const work = `${dir}.${process.pid}.part`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const smaller = refresh ? undefined : extendable({ kernel, packages, sources });
  try {
    if (smaller !== undefined) {
      say(`adding ${smaller.missing.join(', ')} to the cached base root ${smaller.key}; cached afterwards`);
      extendRoot({ from: smaller.dir, missing: smaller.missing, work });
    } else {
      bootstrap({ packages, sources, withGrafana, kernel, work, say });
    }
    renameSync(work, dir);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  removeOlder(kernel, dir);
  return { tarball, packages: list, key };
}

/**
 * mmdebstrap's root of the packages, maintainer scripts run under qemu-user, as work/root.tar with
 * work/packages.tsv.
 * @param {{ packages: string[], sources: string[], withGrafana: boolean, kernel: string, work: string, say: (message: string) => void }} options
 */
function bootstrap({ packages, sources, withGrafana, kernel, work, say }) {
  const keys = join(work, 'keys');
  mkdirSync(join(keys, 'etc/apt/trusted.gpg.d'), { recursive: true });
  if (withGrafana) pinnedKey(GRAFANA_KEY, join(keys, 'etc/apt/trusted.gpg.d/grafana.asc'));
  if (kernel === 'raspberrypi') {
    pinnedKey(RASPBERRYPI_KEY, join(keys, 'etc/apt/trusted.gpg.d/raspberrypi.asc'));
    mkdirSync(join(keys, 'etc/apt/preferences.d'), { recursive: true });
    // Raspberry Pi's kernel and firmware win over Debian's packages of the same names.
    writeFileSync(join(keys, 'etc/apt/preferences.d/raspberrypi'), 'Package: *\nPin: origin archive.raspberrypi.com\nPin-Priority: 600\n');
  }
  // Written before the kernel package installs: its hooks read these.
  const early = join(work, 'early');
  for (const [path, text] of Object.entries(EARLY_FILES)) {
    mkdirSync(join(early, path, '..'), { recursive: true });
    writeFileSync(join(early, path), text);
  }
  say(`bootstrapping Debian ${SUITE} arm64 (${packages.length} packages and their dependencies) under emulation; cached afterwards`);
  run('mmdebstrap', [
    '--variant=minbase',
    '--architectures=arm64',
    '--mode=root',
    '--format=tar',
    '--aptopt=APT::Install-Recommends "false"',
    // Our /etc/default/raspi-firmware is a conffile of raspi-firmware: keep it, do not ask.
    '--dpkgopt=force-confdef',
    '--dpkgopt=force-confold',
    `--include=${packages.join(',')}`,
    `--setup-hook=sync-in ${keys} /`,
    `--essential-hook=sync-in ${early} /`,
    `--customize-hook=chroot "$1" dpkg-query -W -f '\${Package}\\t\${Version}\\n' > ${join(work, 'packages.tsv')}`,
    SUITE,
    join(work, 'root.tar'),
    ...sources,
  ]);
}

/** Older base roots of a variant are of no use once a new one is made (one being made is left alone). */
function removeOlder(/** @type {string} */ kernel, /** @type {string} */ dir) {
  for (const name of readdirSync(applianceCache()))
    if (name.startsWith(`base-root-${SUITE}-${kernel}-`) && !name.endsWith('.part') && join(applianceCache(), name) !== dir)
      rmSync(join(applianceCache(), name), { recursive: true, force: true });
}

/** The digest a base root of these inputs is cached under. */
const rootKey = (/** @type {string[]} */ packages, /** @type {string[]} */ sources) => digest({ packages, sources, early: EARLY_FILES });

/**
 * A cached base root of the same sources and early files made from some of the wanted packages,
 * and the ones it lacks. Its key says what it was made from: the wanted list less the packages its
 * dpkg database does not hold must give that key.
 * @param {{ kernel: string, packages: string[], sources: string[] }} wanted
 */
function extendable({ kernel, packages, sources }) {
  const prefix = `base-root-${SUITE}-${kernel}-`;
  for (const name of readdirSync(applianceCache())) {
    if (!name.startsWith(prefix) || name.endsWith('.part') || name.includes('.')) continue;
    const dir = join(applianceCache(), name);
    if (!existsSync(join(dir, 'root.tar')) || !existsSync(join(dir, 'packages.tsv'))) continue;
    const installed = new Set(
      readFileSync(join(dir, 'packages.tsv'), 'utf8')
        .split('\n')
        .map((line) => line.split('\t')[0]),
    );
    const present = packages.filter((pkg) => installed.has(pkg.split('=')[0]));
    const missing = packages.filter((pkg) => !installed.has(pkg.split('=')[0]));
    if (missing.length > 0 && rootKey(present, sources) === name.slice(prefix.length))
      return { dir, key: name.slice(prefix.length), missing };
  }
  return undefined;
}

/**
 * A copy of a cached root with more packages, installed by the root's own apt and dpkg (under
 * qemu-user) from the root's sources, with what mmdebstrap leaves out of a root left out again.
 * @param {{ from: string, missing: string[], work: string }} options
 */
function extendRoot({ from, missing, work }) {
  const root = join(work, 'root');
  mkdirSync(root);
  run('tar', ['--numeric-owner', '--xattrs', '--xattrs-include=*', '-xpf', join(from, 'root.tar'), '-C', root]);
  // The root's resolv.conf points into /run, empty in a chroot: the host's resolver serves apt there.
  const resolver = join(root, 'run/systemd/resolve/stub-resolv.conf');
  mkdirSync(join(resolver, '..'), { recursive: true });
  copyFileSync('/etc/resolv.conf', resolver);
  const mounts = [
    ['proc', ['-t', 'proc', 'proc']],
    ['sys', ['-t', 'sysfs', 'sysfs']],
    ['dev', ['--bind', '/dev']],
  ].map(([dir, how]) => {
    run('mount', [.../** @type {string[]} */ (how), join(root, /** @type {string} */ (dir))]);
    return join(root, /** @type {string} */ (dir));
  });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', LC_ALL: 'C.UTF-8' };
    run('chroot', [root, 'apt-get', 'update', '-qq'], { env });
    run(
      'chroot',
      [
        root,
        'apt-get',
        'install',
        '-y',
        '-qq',
        '--no-install-recommends',
        '-o',
        'Dpkg::Options::=--force-confdef',
        '-o',
        'Dpkg::Options::=--force-confold',
        ...missing,
      ],
      { env },
    );
    run('chroot', [root, 'apt-get', 'clean'], { env });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format, not JavaScript's
    const format = '${Package}\t${Version}\n';
    writeFileSync(join(work, 'packages.tsv'), run('chroot', [root, 'dpkg-query', '-W', '-f', format], { quiet: true }));
  } finally {
    for (const dir of mounts.reverse()) run('umount', [dir]);
  }
  rmSync(join(root, 'run/systemd'), { recursive: true, force: true });
  for (const entry of readdirSync(join(root, 'var/lib/apt/lists')))
    if (entry !== 'lock' && entry !== 'partial') rmSync(join(root, 'var/lib/apt/lists', entry), { recursive: true, force: true });
  run('tar', ['--numeric-owner', '--xattrs', '--xattrs-include=*', '-cf', join(work, 'root.tar'), '-C', root, '.']);
  rmSync(root, { recursive: true, force: true });
}

/**
 * Files in place before the packages install. raspi-firmware's kernel hook writes cmdline.txt and
 * config.txt from /etc/default/raspi-firmware; the boot loader replaces both (build.mjs), but the
 * hook must find the root's name. Kernel links in /boot (link_in_boot): U-Boot loads the slot's
 * kernel and initramfs as /boot/vmlinuz and /boot/initrd.img, whatever their versions.
 */
const EARLY_FILES = {
  'etc/default/raspi-firmware': 'ROOTPART=LABEL=harbor-root\nCONSOLES="ttyS1,115200 tty0"\n',
  'etc/kernel-img.conf': 'do_symlinks = yes\nlink_in_boot = yes\n',
};

/**
 * Downloads an archive key and keeps it only when it holds the pinned primary key.
 * @param {{ url: string, fingerprint: string }} key
 * @param {string} destination
 */
function pinnedKey(key, destination) {
  run('curl', ['--fail', '--silent', '--show-error', '--location', '--output', destination, key.url]);
  const fingerprints = output('gpg', ['--show-keys', '--with-colons', destination])
    .split('\n')
    .filter((line) => line.startsWith('fpr:'))
    .map((line) => line.split(':')[9]);
  if (!fingerprints.includes(key.fingerprint)) {
    throw new Error(
      `${key.url} does not hold key ${key.fingerprint} (found ${fingerprints.join(', ')}); check the archive's announcement before changing the pin`,
    );
  }
}
