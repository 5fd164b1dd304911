// npm run appliance:build -- [options]: the flashable arm64 image for Raspberry Pi 4/5.
//
//   --kernel debian        Debian's kernel and raspi-firmware (default): Raspberry Pi 4, all from Debian.
//   --kernel raspberrypi   Raspberry Pi's kernels and firmware from archive.raspberrypi.com: Pi 4 and Pi 5.
//   --without-grafana      leave Grafana out (its apt repository is not Debian's); for trying the
//                          build on a machine that reaches only Debian and npm. Not for the field.
//   --out DIR              where the image goes (default dist/appliance)
//   --no-compress          keep the .img only (default: also .img.xz, which flashing tools take)
//   --refresh              fetch the arm64 sysroot packages again
//
// Debian 13 (trixie) for arm64 is bootstrapped by mmdebstrap, with maintainer scripts run under
// qemu-user (binfmt). Needs root and these hosts: Debian's archive, the npm registry (npm ci),
// Maven Central (QuestDB), apt.grafana.com (Grafana) and, for --kernel raspberrypi,
// archive.raspberrypi.com. The image is assembled from file system images made with mkfs -d and
// mtools, without loop devices. Third-party archive keys are pinned by fingerprint.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { QUESTDB_VERSION, fetchQuestDb } from '../scripts/lib/questdb.mjs';
import { credentialFile, credstoreFile } from './firstboot/firstboot.mjs';
import { FORWARD_SECRETS, SECRETS } from './firstboot/settings.mjs';
import { unitCredentials, unitValues } from './firstboot/unit.mjs';
import { DEBIAN_SOURCES, SUITE, digest } from './lib/debian.mjs';
import { applianceCache, ensureBinfmt, ensureHostPackages, output, repoRoot, requireRoot, run, stopwatch } from './lib/host.mjs';
import { GATEWAY_HOME, QUESTDB_JAR, UNIT_DIR, installGrafanaProvisioning, installSystemdFiles, projectUnits } from './lib/layout.mjs';
import { CROSS_TOOLS, stageGateway } from './lib/stage-gateway.mjs';
import { unpackSysroot } from './lib/sysroot.mjs';

/** Grafana OSS from Grafana's own apt repository, pinned; its signing key is checked by fingerprint. */
const GRAFANA_VERSION = process.env['GRAFANA_VERSION'] ?? '13.2.3';
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
];
const KERNEL_PACKAGES = {
  debian: ['linux-image-arm64', 'raspi-firmware'],
  raspberrypi: ['linux-image-rpi-v8', 'linux-image-rpi-2712', 'raspi-firmware'],
};
/** Services of the base system the image starts, besides the units of systemd/. */
const SYSTEM_UNITS = ['harbor-firstboot.service', 'systemd-networkd.service', 'systemd-resolved.service', 'systemd-timesyncd.service'];
/** Timers that would download and write on an appliance whose updates come as a new image. */
const MASKED_UNITS = ['apt-daily.timer', 'apt-daily-upgrade.timer'];
/** Grafana's own unit: harbor-grafana.service replaces it and conflicts with it, so it can never start. */
const GRAFANA_PACKAGE_UNIT = 'grafana-server.service';

const MIB = 1024 * 1024;
const BOOT_MIB = 512;

const args = process.argv.slice(2);
const option = (/** @type {string} */ name, /** @type {string} */ fallback) => {
  const index = args.indexOf(name);
  return index >= 0 ? String(args[index + 1]) : fallback;
};
const kernel = option('--kernel', 'debian');
if (kernel !== 'debian' && kernel !== 'raspberrypi') throw new Error('--kernel is debian or raspberrypi');
const withGrafana = !args.includes('--without-grafana');
const outDir = resolve(repoRoot, option('--out', 'dist/appliance'));
const elapsed = stopwatch();
const say = (/** @type {string} */ message) => process.stdout.write(`[appliance:build ${elapsed().toFixed(0)} s] ${message}\n`);

requireRoot('bootstrap a root file system');
ensureHostPackages({
  mmdebstrap: 'mmdebstrap',
  'arch-test': 'arch-test',
  'qemu-aarch64-static': 'qemu-user-static',
  'update-binfmts': 'binfmt-support',
  'mkfs.vfat': 'dosfstools',
  mcopy: 'mtools',
  'mkfs.ext4': 'e2fsprogs',
  sfdisk: 'fdisk',
  gpg: 'gpg',
  xz: 'xz-utils',
  ...CROSS_TOOLS,
});
ensureBinfmt();

const gitCommit = output('git', ['-C', repoRoot, 'rev-parse', '--short=12', 'HEAD']);
// One timestamp for every file of the image, so that the same inputs give the same bytes.
const sourceDateEpoch = process.env['SOURCE_DATE_EPOCH'] ?? output('git', ['-C', repoRoot, 'log', '-1', '--format=%ct']);
const version = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).version;
const name = `harbor-gateway-${version}-${kernel}-arm64${withGrafana ? '' : '-without-grafana'}`;

const work = join(applianceCache(), `build-${process.pid}`);
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
try {
  // Everything the project adds to the image, as one tree synced into the root after the packages.
  // appliance/rootfs holds what only the appliance has; the units and their files come from systemd/.
  const overlay = join(work, 'overlay');
  const grafanaDropIns = join(repoRoot, 'appliance/rootfs', UNIT_DIR, 'harbor-grafana.service.d');
  cpSync(join(repoRoot, 'appliance/rootfs'), overlay, {
    recursive: true,
    filter: (path) => withGrafana || !path.startsWith(grafanaDropIns),
  });
  const sysroot = unpackSysroot(join(work, 'sysroot'), { refresh: args.includes('--refresh') });
  stageGateway({ sysroot, destination: join(overlay, GATEWAY_HOME) });
  installSystemdFiles(overlay, { withGrafana });
  if (withGrafana) installGrafanaProvisioning(overlay);
  cpSync(join(repoRoot, 'appliance/firstboot'), join(overlay, 'usr/lib/harbor-appliance'), { recursive: true });
  mkdirSync(join(overlay, QUESTDB_JAR, '..'), { recursive: true });
  cpSync(await fetchQuestDb(), join(overlay, QUESTDB_JAR));
  writeFileSync(join(overlay, QUESTDB_JAR, '../VERSION'), `${QUESTDB_VERSION}\n`);
  mkdirSync(join(overlay, 'usr/share/doc/harbor-appliance'), { recursive: true });
  cpSync(join(repoRoot, 'docs/appliance.md'), join(overlay, 'usr/share/doc/harbor-appliance/appliance.md'));
  mkdirSync(join(overlay, 'boot/firmware'), { recursive: true });
  cpSync(join(repoRoot, 'appliance/boot/harbor.conf'), join(overlay, 'boot/firmware/harbor.conf'));
  if (kernel === 'raspberrypi') {
    // Raspberry Pi's firmware reads these; Debian's raspi-firmware writes its own from /etc/default.
    writeFileSync(join(overlay, 'boot/firmware/config.txt'), 'arm_64bit=1\nauto_initramfs=1\nenable_uart=1\ndisable_overscan=1\n');
    writeFileSync(
      join(overlay, 'boot/firmware/cmdline.txt'),
      'console=serial0,115200 console=tty1 root=LABEL=harbor-root rootfstype=ext4 fsck.repair=yes rootwait\n',
    );
  }
  writeFileSync(
    join(overlay, 'etc/harbor-appliance-release'),
    `HARBOR_GATEWAY_VERSION=${version}\nGIT_COMMIT=${gitCommit}\nDEBIAN_SUITE=${SUITE}\nKERNEL=${kernel}\nQUESTDB_VERSION=${QUESTDB_VERSION}\nGRAFANA_VERSION=${withGrafana ? GRAFANA_VERSION : 'none'}\n`,
  );
  say('gateway, first boot, QuestDB and units staged');

  // Written before the kernel package installs: its hooks read it to write cmdline.txt and config.txt.
  const early = join(work, 'early');
  mkdirSync(join(early, 'etc/default'), { recursive: true });
  writeFileSync(join(early, 'etc/default/raspi-firmware'), 'ROOTPART=LABEL=harbor-root\nCONSOLES="ttyS1,115200 tty0"\n');

  const sources = [...DEBIAN_SOURCES];
  const keys = join(work, 'keys');
  mkdirSync(join(keys, 'etc/apt/trusted.gpg.d'), { recursive: true });
  if (withGrafana) {
    pinnedKey(GRAFANA_KEY, join(keys, 'etc/apt/trusted.gpg.d/grafana.asc'));
    sources.push(GRAFANA_SOURCE);
  }
  if (kernel === 'raspberrypi') {
    pinnedKey(RASPBERRYPI_KEY, join(keys, 'etc/apt/trusted.gpg.d/raspberrypi.asc'));
    mkdirSync(join(keys, 'etc/apt/preferences.d'), { recursive: true });
    // Raspberry Pi's kernel and firmware win over Debian's packages of the same names.
    writeFileSync(join(keys, 'etc/apt/preferences.d/raspberrypi'), 'Package: *\nPin: origin archive.raspberrypi.com\nPin-Priority: 600\n');
    sources.push(RASPBERRYPI_SOURCE);
  }

  const packages = [...BASE_PACKAGES, ...KERNEL_PACKAGES[kernel], ...(withGrafana ? [`grafana=${GRAFANA_VERSION}`] : [])];
  const enabled = [...SYSTEM_UNITS, ...projectUnits(withGrafana)];
  const masked = [...MASKED_UNITS, ...(withGrafana ? [GRAFANA_PACKAGE_UNIT] : [])];
  const rootfs = join(work, 'rootfs');
  say(`bootstrapping Debian ${SUITE} arm64 (${packages.length} packages and their dependencies) under emulation`);
  run(
    'mmdebstrap',
    [
      '--variant=minbase',
      '--architectures=arm64',
      '--mode=root',
      '--format=directory',
      '--aptopt=APT::Install-Recommends "false"',
      // Our /etc/default/raspi-firmware is a conffile of raspi-firmware: keep it, do not ask.
      '--dpkgopt=force-confdef',
      '--dpkgopt=force-confold',
      `--include=${packages.join(',')}`,
      `--setup-hook=sync-in ${keys} /`,
      `--essential-hook=sync-in ${early} /`,
      `--customize-hook=sync-in ${overlay} /`,
      `--customize-hook=chroot "$1" systemctl enable ${enabled.join(' ')}`,
      `--customize-hook=chroot "$1" systemctl mask ${masked.join(' ')}`,
      // Each card makes its own machine id (and from it its default hostname) on first boot.
      '--customize-hook=truncate -s 0 "$1/etc/machine-id" && rm -f "$1/var/lib/dbus/machine-id" && echo harbor > "$1/etc/hostname"',
      '--customize-hook=ln -sf ../run/systemd/resolve/stub-resolv.conf "$1/etc/resolv.conf"',
      `--customize-hook=chroot "$1" dpkg-query -W -f '\${Package}\\t\${Version}\\n' > ${join(work, 'packages.tsv')}`,
      SUITE,
      rootfs,
      ...sources,
    ],
    { env: { ...process.env, SOURCE_DATE_EPOCH: sourceDateEpoch } },
  );
  say('root file system bootstrapped');

  smokeTest(rootfs);
  checkUnitPaths(rootfs, enabled);
  const isEnabled = (/** @type {string} */ unit) =>
    spawnSync('chroot', [rootfs, 'systemctl', 'is-enabled', unit], { encoding: 'utf8' }).stdout.trim();
  for (const unit of enabled) {
    // A unit without an [Install] section is accepted by `systemctl enable` but would never start.
    const state = isEnabled(unit);
    if (state !== 'enabled') throw new Error(`${unit} is ${state} in the image, not enabled: does it have an [Install] section?`);
  }
  for (const unit of masked) if (isEnabled(unit) !== 'masked') throw new Error(`${unit} is not masked in the image`);
  say('the image runs its gateway, Java and Node under emulation; unit paths and credentials resolve');

  mkdirSync(outDir, { recursive: true });
  const image = assemble(rootfs, join(outDir, `${name}.img`));
  cpSync(join(work, 'packages.tsv'), join(outDir, `${name}.packages.tsv`));
  let artefact = image;
  if (!args.includes('--no-compress')) {
    run('xz', ['--threads=0', '-6', '--keep', '--force', image]);
    artefact = `${image}.xz`;
  }
  writeFileSync(`${artefact}.sha256`, `${output('sha256sum', [artefact]).split(' ')[0]}  ${basename(artefact)}\n`);
  say(`image written: ${artefact} (${(statSync(artefact).size / MIB).toFixed(0)} MiB)`);
} finally {
  // A failed bootstrap can leave /proc, /sys or /dev mounted in the root; never delete through them.
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '');
  for (const mount of mounts.filter((path) => path.startsWith(`${work}/`)).reverse()) run('umount', ['--lazy', mount]);
  rmSync(work, { recursive: true, force: true });
}

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

/** The installed image, under emulation: Node loads the arm64 module, the bundle runs, Java starts. */
function smokeTest(/** @type {string} */ rootfs) {
  const inRoot = (/** @type {string[]} */ command) => output('chroot', [rootfs, ...command]);
  inRoot(['/usr/bin/node', '-e', `new (require('/${GATEWAY_HOME}/node_modules/better-sqlite3'))(':memory:').close()`]);
  say(
    `gateway ${inRoot(['/usr/bin/node', `/${GATEWAY_HOME}/dist/gateway.mjs`, 'version'])} on Node ${inRoot(['/usr/bin/node', '--version'])}`,
  );
  const java = spawnSync('chroot', [rootfs, '/usr/bin/java', '-version'], { encoding: 'utf8' });
  if (java.status !== 0) throw new Error(`java does not start in the image: ${java.stderr}`);
  say(java.stderr.split('\n')[0] ?? 'java runs');
}

/**
 * The units in systemd/ and the image's layout are written apart. Every absolute path under /opt,
 * /usr, /etc, /bin or /lib that an enabled unit (with its drop-ins) runs, reads or points to must be
 * in the image, an optional EnvironmentFile=- excepted; every credential it loads must be a file
 * first boot writes.
 * @param {string} rootfs
 * @param {string[]} enabled
 */
function checkUnitPaths(rootfs, enabled) {
  const written = new Set([
    ...SECRETS.map(({ credential }) => `/${credentialFile(credential)}`),
    ...FORWARD_SECRETS.map(({ credential }) => `/${credstoreFile(credential)}`),
  ]);
  // Inside the image, where links such as /usr/bin/java -> /etc/alternatives/java point into the image.
  const existsInImage = (/** @type {string} */ path) => spawnSync('chroot', [rootfs, 'test', '-e', path]).status === 0;
  /** @type {string[]} */
  const missing = [];
  for (const unit of enabled) {
    const files = [join(rootfs, UNIT_DIR, unit), join(rootfs, 'usr/lib/systemd/system', unit)].filter((path) => existsSync(path));
    const dropins = join(rootfs, UNIT_DIR, `${unit}.d`);
    if (existsSync(dropins)) files.push(...readdirSync(dropins).map((file) => join(dropins, file)));
    if (files.length === 0) missing.push(`${unit} (no unit file)`);
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const { name, path } of unitCredentials(text)) {
        if (!written.has(path)) missing.push(`credential ${name} from ${path}, which first boot does not write (${basename(file)})`);
      }
      for (const key of ['ExecStartPre', 'ExecStart', 'ExecStartPost', 'ExecStop', 'Environment', 'EnvironmentFile', 'Documentation']) {
        for (const value of unitValues(text, key)) {
          if (key === 'EnvironmentFile' && value.startsWith('-')) continue;
          for (const token of value.split(/[\s'"=:;<>|]+/)) {
            const path = token.replace(/^[-@+!]+/, '');
            if (/^\/(opt|usr|etc|bin|sbin|lib)\//.test(path) && !existsInImage(path))
              missing.push(`${path} (${key}= of ${basename(file)})`);
          }
        }
      }
    }
  }
  if (missing.length > 0) throw new Error(`units refer to what the image does not have:\n  ${missing.join('\n  ')}`);
}

/**
 * Writes the card image: boot (FAT32), root (ext4) and var (ext4, grown to the card at first boot),
 * MBR-partitioned as the Raspberry Pi firmware reads it.
 * @param {string} rootfs
 * @param {string} image
 */
function assemble(rootfs, image) {
  const parts = join(work, 'parts');
  mkdirSync(parts, { recursive: true });
  const bootTree = join(parts, 'boot');
  const varTree = join(parts, 'var');
  renameSync(join(rootfs, 'boot/firmware'), bootTree);
  mkdirSync(join(rootfs, 'boot/firmware'));
  renameSync(join(rootfs, 'var'), varTree);
  mkdirSync(join(rootfs, 'var'), { mode: 0o755 });

  // Maintainer scripts and kernel hooks stamp files with the build's time; clamp them to the commit's.
  for (const tree of [rootfs, varTree, bootTree]) {
    run('find', [tree, '-newermt', `@${sourceDateEpoch}`, '-exec', 'touch', '--no-dereference', `--date=@${sourceDateEpoch}`, '{}', '+']);
  }
  const usedMiB = (/** @type {string} */ dir) => Math.ceil(Number(output('du', ['-sb', dir]).split('\t')[0]) / MIB);
  // Room for security updates of the root; /var is grown to the card on first boot.
  const rootMiB = Math.ceil((usedMiB(rootfs) * 1.3 + 768) / 64) * 64;
  const varMiB = Math.ceil((usedMiB(varTree) * 1.3 + 256) / 64) * 64;
  const ids = digest({ gitCommit, sourceDateEpoch, kernel, withGrafana });
  const uuid = (/** @type {string} */ seed) => {
    const hex = digest({ ids, seed }) + digest({ seed, ids }) + digest({ ids, seed, n: 2 });
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  };
  const fakeTime = { ...process.env, E2FSPROGS_FAKE_TIME: sourceDateEpoch, SOURCE_DATE_EPOCH: sourceDateEpoch };
  const ext4 = (/** @type {string} */ label, /** @type {string} */ tree, /** @type {number} */ mib) => {
    const file = join(parts, `${label}.ext4`);
    // 4 KiB blocks although the file system starts small: /var grows to the whole card.
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
        uuid(label),
        '-E',
        `hash_seed=${uuid(`${label}-hash`)},root_owner=0:0`,
        '-d',
        tree,
        file,
        `${mib}M`,
      ],
      { env: fakeTime },
    );
    return file;
  };
  const rootImage = ext4('harbor-root', rootfs, rootMiB);
  const varImage = ext4('harbor-var', varTree, varMiB);

  const bootImage = join(parts, 'boot.vfat');
  run('mkfs.vfat', ['-F', '32', '-n', 'HARBOR-BOOT', '--invariant', '-C', bootImage, String(BOOT_MIB * 1024)], { quiet: true });
  const entries = readdirSync(bootTree).map((entry) => join(bootTree, entry));
  if (!entries.some((entry) => /\.(dtb|img)$|^vmlinuz/.test(basename(entry))))
    throw new Error('no kernel or device tree in /boot/firmware: the card would not boot');
  run('mcopy', ['-s', '-p', '-m', '-i', bootImage, ...entries, '::/'], { env: fakeTime });

  // 4 MiB before the first partition keeps every partition aligned to the card's erase blocks.
  const bootStart = 4;
  const rootStart = bootStart + BOOT_MIB;
  const varStart = rootStart + rootMiB;
  const totalMiB = varStart + varMiB;
  rmSync(image, { force: true });
  run('truncate', ['-s', `${totalMiB}M`, image]);
  const sectors = (/** @type {number} */ mib) => mib * 2048;
  const table = [
    'label: dos',
    `label-id: 0x${ids.slice(0, 8)}`,
    `start=${sectors(bootStart)}, size=${sectors(BOOT_MIB)}, type=c, bootable`,
    `start=${sectors(rootStart)}, size=${sectors(rootMiB)}, type=83`,
    `start=${sectors(varStart)}, size=${sectors(varMiB)}, type=83`,
    '',
  ].join('\n');
  writeFileSync(join(parts, 'table.sfdisk'), table);
  run('sh', ['-c', `sfdisk --quiet ${image} < ${join(parts, 'table.sfdisk')}`]);
  for (const [file, start] of /** @type {const} */ ([
    [bootImage, bootStart],
    [rootImage, rootStart],
    [varImage, varStart],
  ])) {
    run('dd', [`if=${file}`, `of=${image}`, 'bs=1M', `seek=${start}`, 'conv=notrunc,sparse', 'status=none']);
  }
  return image;
}
