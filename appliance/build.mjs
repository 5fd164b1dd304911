// npm run appliance:build -- [options]: a release's flashable arm64 image for Raspberry Pi 4/5 and
// its signed update bundle, with the manifest, the SBOM, the changelog and checksums, into one folder.
//
//   --kernel debian        Debian's kernel, raspi-firmware and U-Boot (default): Raspberry Pi 4, all from Debian.
//   --kernel raspberrypi   Raspberry Pi's kernels and firmware from archive.raspberrypi.com: Pi 4 and Pi 5.
//   --without-grafana      leave Grafana out (its apt repository is not Debian's); for building on a
//                          machine that reaches only Debian and npm. Said in the manifest. Not for the field.
//   --release X.Y.Z        an earlier release's image: its gateway built from the commit CHANGELOG.md
//                          records, on this tree's appliance (what an over-the-air update starts from)
//   --signing-key KEY --signing-cert CERT --keyring CA
//                          the release signing key and the CA the image trusts (docs/appliance.md)
//   --test-keys            throwaway signing keys in the cache instead; such an image is not for the field
//   --out DIR              where the release folder goes (default dist/appliance)
//   --no-compress          keep the .img only (default: also .img.xz, which flashing tools take)
//   --refresh              bootstrap the Debian root and fetch the arm64 sysroot packages again
//
// Debian 13 (trixie) for arm64 is bootstrapped by mmdebstrap once per package set, with maintainer
// scripts run under qemu-user (binfmt), and cached (lib/base-root.mjs); each build puts the project's
// files on a copy of it. Needs root and these hosts: Debian's archive, the npm registry (npm ci),
// Maven Central (QuestDB), apt.grafana.com (Grafana) and, for --kernel raspberrypi,
// archive.raspberrypi.com. Third-party archive keys are pinned by fingerprint.
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  copyFileSync,
} from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { QUESTDB_VERSION, fetchQuestDb } from '../scripts/lib/questdb.mjs';
import { credstoreFile, secretFile } from './board/firstboot.mjs';
import { SECRETS, STORED_SECRETS } from './board/settings.mjs';
import { unitCredentials, unitValues } from './board/unit.mjs';
import { GRAFANA_VERSION, baseRoot } from './lib/base-root.mjs';
import { makeBundle } from './lib/bundle.mjs';
import { SUITE, digest } from './lib/debian.mjs';
import { applianceCache, ensureBinfmt, ensureHostPackages, output, repoRoot, requireRoot, run, stopwatch } from './lib/host.mjs';
import { BOOT_MIB, SLOT_MIB, bootImage, checkBootTree, ext4Image, usedMiB, writeCard } from './lib/image.mjs';
import { GATEWAY_HOME, QUESTDB_JAR, UNIT_DIR, installGrafanaProvisioning, installSystemdFiles, projectUnits } from './lib/layout.mjs';
import { WITHOUT_GRAFANA, describeFile, packageVersions, writeChecksums, writeSbom } from './lib/manifest.mjs';
import { currentSource, releaseSource } from './lib/release-source.mjs';
import { signingMaterial } from './lib/signing.mjs';
import { CROSS_TOOLS, stageGateway } from './lib/stage-gateway.mjs';
import { unpackSysroot } from './lib/sysroot.mjs';

/** Services of the base system and the appliance the image starts, besides the units of systemd/. */
const SYSTEM_UNITS = [
  'harbor-firstboot.service',
  'harbor-config.path',
  'harbor-update-report.service',
  'harbor-update-confirm.service',
  'harbor-update-file.service',
  'harbor-update-url.timer',
  'harbor-update-upload.path',
  'harbor-update-rollback.path',
  'harbor-update-handover.service',
  'harbor-banner.service',
  'harbor-banner-online.service',
  'systemd-networkd.service',
  'systemd-resolved.service',
  'systemd-timesyncd.service',
];
/** Timers that would download and write on an appliance whose updates come as signed bundles. */
const MASKED_UNITS = ['apt-daily.timer', 'apt-daily-upgrade.timer'];
/** Grafana's own unit: harbor-grafana.service replaces it and conflicts with it, so it can never start. */
const GRAFANA_PACKAGE_UNIT = 'grafana-server.service';
/** The settings a site gives live on the data partition, bound over these folders of every slot. */
export const SHARED_ETC = ['etc/harbor-gateway', 'etc/credstore'];
export const SHARED_ETC_SOURCE = 'var/lib/harbor-appliance/etc';

const MIB = 1024 * 1024;

const args = process.argv.slice(2);
const option = (/** @type {string} */ name) => {
  const index = args.indexOf(name);
  return index >= 0 ? String(args[index + 1]) : undefined;
};
const kernel = option('--kernel') ?? 'debian';
if (kernel !== 'debian' && kernel !== 'raspberrypi') throw new Error('--kernel is debian or raspberrypi');
const withGrafana = !args.includes('--without-grafana');
const outDir = resolve(repoRoot, option('--out') ?? 'dist/appliance');
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
  rauc: 'rauc',
  mksquashfs: 'squashfs-tools',
  mkimage: 'u-boot-tools',
  openssl: 'openssl',
  ...CROSS_TOOLS,
});
ensureBinfmt();

const signing = signingMaterial({
  key: option('--signing-key'),
  cert: option('--signing-cert'),
  keyring: option('--keyring'),
  testKeys: args.includes('--test-keys'),
});
const releaseVersion = option('--release');
const source = releaseVersion === undefined ? currentSource() : releaseSource(releaseVersion);
const applianceCommit = output('git', ['-C', repoRoot, 'rev-parse', 'HEAD']);
// One timestamp for every file of the image, so that the same inputs give the same bytes.
const sourceDateEpoch = process.env['SOURCE_DATE_EPOCH'] ?? output('git', ['-C', repoRoot, 'log', '-1', '--format=%ct']);
const name = `harbor-gateway-${source.version}-${kernel}-arm64${withGrafana ? '' : '-without-grafana'}`;
const release = join(outDir, name);
say(
  `${name}: gateway ${source.gatewayVersion} (${source.commit.slice(0, 12)}), appliance ${applianceCommit.slice(0, 12)}${signing.test ? ', TEST signing keys' : ''}`,
);

const work = join(applianceCache(), `build-${process.pid}`);
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
try {
  const base = baseRoot({ kernel, withGrafana, refresh: args.includes('--refresh'), say });
  say(`base root ${base.key} (cached)`);
  const rootfs = join(work, 'rootfs');
  mkdirSync(rootfs);
  run('tar', ['--numeric-owner', '--xattrs', '--xattrs-include=*', '-xpf', base.tarball, '-C', rootfs]);
  const packages = packageVersions(base.packages);

  // Everything the project adds to the image, as one tree copied over the packages.
  // appliance/rootfs holds what only the appliance has; the units and their files come from systemd/.
  const overlay = join(work, 'overlay');
  const grafanaDropIns = join(repoRoot, 'appliance/rootfs', UNIT_DIR, 'harbor-grafana.service.d');
  cpSync(join(repoRoot, 'appliance/rootfs'), overlay, {
    recursive: true,
    filter: (path) => withGrafana || !path.startsWith(grafanaDropIns),
  });
  const sysroot = unpackSysroot(join(work, 'sysroot'), { refresh: args.includes('--refresh') });
  await stageGateway({
    sysroot,
    destination: join(overlay, GATEWAY_HOME),
    tree: releaseVersion === undefined ? undefined : source.dir,
    version: source.version,
  });
  installSystemdFiles(overlay, { withGrafana });
  if (withGrafana) installGrafanaProvisioning(overlay);
  cpSync(join(repoRoot, 'appliance/board'), join(overlay, 'usr/lib/harbor-appliance'), { recursive: true });
  mkdirSync(join(overlay, 'usr/sbin'), { recursive: true });
  symlinkSync('../lib/harbor-appliance/update.mjs', join(overlay, 'usr/sbin/harbor-update'));
  mkdirSync(join(overlay, QUESTDB_JAR, '..'), { recursive: true });
  cpSync(await fetchQuestDb(), join(overlay, QUESTDB_JAR));
  writeFileSync(join(overlay, QUESTDB_JAR, '../VERSION'), `${QUESTDB_VERSION}\n`);
  mkdirSync(join(overlay, 'usr/share/doc/harbor-appliance'), { recursive: true });
  cpSync(join(repoRoot, 'docs/appliance.md'), join(overlay, 'usr/share/doc/harbor-appliance/appliance.md'));
  mkdirSync(join(overlay, 'etc/rauc'), { recursive: true });
  copyFileSync(signing.keyring, join(overlay, 'etc/rauc/keyring.pem'));
  const releaseFile = {
    APPLIANCE_VERSION: source.version,
    HARBOR_GATEWAY_VERSION: source.gatewayVersion,
    GIT_COMMIT: source.commit,
    APPLIANCE_COMMIT: applianceCommit,
    QUEUE_FORMAT: String(source.queueFormat),
    DEBIAN_SUITE: SUITE,
    KERNEL: kernel,
    QUESTDB_VERSION,
    GRAFANA_VERSION: withGrafana ? GRAFANA_VERSION : 'none',
    SIGNING: signing.test ? 'test keys, not for the field' : `release key, CA SHA-256 ${signing.fingerprint}`,
  };
  writeFileSync(
    join(overlay, 'etc/harbor-appliance-release'),
    Object.entries(releaseFile)
      .map(([key, value]) => `${key}=${value}\n`)
      .join(''),
  );
  run('cp', ['-a', `${overlay}/.`, rootfs]);
  say('gateway, board programs, QuestDB and units on the Debian root');

  // Node, Java and systemctl in the root see the system as they would on the board.
  /** @type {[string, string[]][]} */
  const mounts = [
    ['proc', ['-t', 'proc', 'proc']],
    ['sys', ['-t', 'sysfs', 'sysfs']],
    ['dev', ['--bind', '/dev']],
  ];
  const mounted = mounts.map(([dir, how]) => {
    run('mount', [...how, join(rootfs, dir)]);
    return join(rootfs, dir);
  });
  const enabled = [...SYSTEM_UNITS, ...projectUnits(withGrafana)];
  const masked = [...MASKED_UNITS, ...(withGrafana ? [GRAFANA_PACKAGE_UNIT] : [])];
  run('chroot', [rootfs, 'systemctl', 'enable', ...enabled], { quiet: true });
  run('chroot', [rootfs, 'systemctl', 'mask', ...masked], { quiet: true });
  // Each card makes its own machine id (and from it its default hostname) on first boot; an update
  // carries the card's over to the new slot (the bundle's hook).
  writeFileSync(join(rootfs, 'etc/machine-id'), '');
  rmSync(join(rootfs, 'var/lib/dbus/machine-id'), { force: true });
  writeFileSync(join(rootfs, 'etc/hostname'), 'harbor\n');
  rmSync(join(rootfs, 'etc/resolv.conf'), { force: true });
  symlinkSync('../run/systemd/resolve/stub-resolv.conf', join(rootfs, 'etc/resolv.conf'));

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
  for (const link of ['boot/vmlinuz', 'boot/initrd.img'])
    if (spawnSync('chroot', [rootfs, 'test', '-s', `/${link}`]).status !== 0)
      throw new Error(`/${link} is missing: U-Boot boots the slot's kernel by that name`);
  for (const dir of mounted.reverse()) run('umount', [dir]);
  say('the image runs its gateway, Java and Node under emulation; unit paths, credentials and kernel links resolve');

  // The three trees of the card: boot partition, root slot, data partition.
  const parts = join(work, 'parts');
  mkdirSync(parts);
  const bootTree = join(parts, 'boot');
  renameSync(join(rootfs, 'boot/firmware'), bootTree);
  mkdirSync(join(rootfs, 'boot/firmware'));
  prepareBootTree(bootTree, rootfs);
  const dataTree = join(parts, 'var');
  renameSync(join(rootfs, 'var'), dataTree);
  mkdirSync(join(rootfs, 'var'), { mode: 0o755 });
  for (const dir of SHARED_ETC) {
    const shared = join(dataTree, SHARED_ETC_SOURCE.replace(/^var\//, ''), basename(dir));
    mkdirSync(join(shared, '..'), { recursive: true });
    if (existsSync(join(rootfs, dir))) renameSync(join(rootfs, dir), shared);
    else mkdirSync(shared, { mode: 0o700 });
    mkdirSync(join(rootfs, dir), { mode: 0o755 });
  }
  // Maintainer scripts and kernel hooks stamp files with the build's time; clamp them to the commit's.
  for (const tree of [rootfs, dataTree, bootTree])
    run('find', [tree, '-newermt', `@${sourceDateEpoch}`, '-exec', 'touch', '--no-dereference', `--date=@${sourceDateEpoch}`, '{}', '+']);

  const seed = { applianceCommit, commit: source.commit, sourceDateEpoch, kernel, withGrafana };
  // The root is written as it is into a slot by every update: its size is its content and some room.
  const rootMiB = Math.ceil((usedMiB(rootfs) * 1.1 + 256) / 64) * 64;
  const dataMiB = Math.ceil((usedMiB(dataTree) * 1.3 + 256) / 64) * 64;
  const rootImage = ext4Image({
    tree: rootfs,
    file: join(parts, 'root.ext4'),
    label: 'harbor-root',
    mib: rootMiB,
    seed,
    epoch: sourceDateEpoch,
  });
  const dataImage = ext4Image({
    tree: dataTree,
    file: join(parts, 'data.ext4'),
    label: 'harbor-var',
    mib: dataMiB,
    seed,
    epoch: sourceDateEpoch,
  });
  const bootFiles = checkBootTree(bootTree);
  const bootFat = bootImage({ tree: bootTree, file: join(parts, 'boot.vfat'), epoch: sourceDateEpoch });
  say(
    `root ${rootMiB} MiB of a ${SLOT_MIB} MiB slot, data ${dataMiB} MiB (grows to the card), boot ${BOOT_MIB} MiB with ${bootFiles.length} files`,
  );

  rmSync(release, { recursive: true, force: true });
  mkdirSync(release, { recursive: true });
  const image = writeCard({
    image: join(release, `${name}.img`),
    boot: bootFat,
    root: rootImage,
    rootMiB,
    data: dataImage,
    dataMiB,
    diskId: digest(seed).slice(0, 8),
    work: parts,
  });
  say(`image written: ${basename(image)} (${(statSync(image).size / MIB).toFixed(0)} MiB)`);
  const bundleStarted = elapsed();
  const bundle = makeBundle({
    rootImage,
    bundle: join(release, `${name}.raucb`),
    version: source.version,
    description: `Harbor Gateway ${source.version} (gateway ${source.gatewayVersion}, ${kernel} kernel${withGrafana ? '' : ', without Grafana'})`,
    build: `${source.commit.slice(0, 12)}/${applianceCommit.slice(0, 12)}`,
    signing,
    work: parts,
  });
  say(
    `bundle signed: ${basename(bundle)} (${(statSync(bundle).size / MIB).toFixed(0)} MiB in ${(elapsed() - bundleStarted).toFixed(0)} s)`,
  );

  const sbom = writeSbom(source.dir, join(release, `${name}.sbom.cdx.json`));
  const packagesFile = join(release, `${name}.packages.tsv`);
  copyFileSync(base.packages, packagesFile);
  const changelog = join(release, 'CHANGELOG.md');
  copyFileSync(join(source.dir, 'CHANGELOG.md'), changelog);
  let artefact = image;
  if (!args.includes('--no-compress')) {
    run('xz', ['--threads=0', '-6', '--keep', '--force', image]);
    artefact = `${image}.xz`;
  }
  const manifestFile = join(release, `${name}.manifest.json`);
  const version = (/** @type {string} */ pkg) => packages.get(pkg) ?? 'not installed';
  const manifest = {
    name,
    version: source.version,
    released: source.released,
    gateway: { version: source.gatewayVersion, commit: source.commit, queueFormat: source.queueFormat },
    appliance: { commit: applianceCommit, sourceDateEpoch: Number(sourceDateEpoch) },
    debian: {
      suite: SUITE,
      packages: packages.size,
      kernel: `${kernel}: linux-image ${version(kernel === 'debian' ? 'linux-image-arm64' : 'linux-image-rpi-v8')}`,
    },
    node: version('nodejs'),
    java: version('openjdk-21-jre-headless'),
    questdb: QUESTDB_VERSION,
    grafana: withGrafana ? version('grafana') : WITHOUT_GRAFANA,
    rauc: version('rauc'),
    uBoot: version('u-boot-rpi'),
    layout: { bootMiB: BOOT_MIB, slotMiB: SLOT_MIB, rootMiB, dataMiBAtFlash: dataMiB },
    signing: signing.test
      ? { keys: 'TEST keys made by the build (--test-keys): not for the field', caSha256: signing.fingerprint }
      : { keys: 'release signing key', caSha256: signing.fingerprint },
    sbom: {
      file: basename(sbom.file),
      format: sbom.format,
      components: sbom.components,
      source: 'npm sbom --omit dev (package-lock.json)',
    },
    files: [artefact, bundle, packagesFile, changelog, sbom.file].map(describeFile),
  };
  writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
  writeChecksums(join(release, 'SHA256SUMS'), [artefact, bundle, manifestFile, sbom.file, packagesFile, changelog]);
  say(`release folder: ${release} (image, bundle, manifest, SBOM with ${sbom.components} components, packages, changelog, SHA256SUMS)`);
} finally {
  // A failed chroot can leave /proc, /sys or /dev mounted in the root; never delete through them.
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '');
  for (const mount of mounts.filter((path) => path.startsWith(`${work}/`)).reverse()) run('umount', ['--lazy', mount]);
  rmSync(work, { recursive: true, force: true });
}

/**
 * The boot partition: the firmware and device trees raspi-firmware put there, U-Boot for the
 * Raspberry Pi and the firmware's config.txt that starts it, the boot script, the slot files (slot A
 * committed, no trial) and harbor.conf. The kernels stay in their slots.
 * @param {string} tree
 * @param {string} rootfs
 */
function prepareBootTree(tree, rootfs) {
  for (const entry of readdirSync(tree)) if (/^(vmlinuz|initrd\.img|cmdline\.txt)/.test(entry)) rmSync(join(tree, entry), { force: true });
  copyFileSync(join(rootfs, 'usr/lib/u-boot/rpi_arm64/u-boot.bin'), join(tree, 'u-boot.bin'));
  writeFileSync(join(tree, 'config.txt'), 'arm_64bit=1\nenable_uart=1\nkernel=u-boot.bin\n');
  // The script without its comment lines: U-Boot's shell reads them, but every byte is parsed at each boot.
  const script = join(work, 'boot.cmd');
  const lines = readFileSync(join(repoRoot, 'appliance/boot/boot.cmd'), 'utf8').split('\n');
  writeFileSync(script, lines.filter((line) => !line.trimStart().startsWith('#') && line.trim() !== '').join('\n'));
  run(
    'mkimage',
    ['-A', 'arm64', '-O', 'linux', '-T', 'script', '-C', 'none', '-n', 'Harbor Gateway slot choice', '-d', script, join(tree, 'boot.scr')],
    {
      quiet: true,
    },
  );
  writeFileSync(join(tree, 'harbor-slot.env'), 'HARBOR_SLOT=A\n');
  writeFileSync(join(tree, 'harbor-try.env'), 'HARBOR_TRY=\nHARBOR_TRY_LEFT=0\n');
  copyFileSync(join(repoRoot, 'appliance/boot/harbor.conf'), join(tree, 'harbor.conf'));
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
 * in the image, an optional EnvironmentFile=- and the site's optional files excepted; every credential it loads must be a file
 * first boot writes.
 * @param {string} rootfs
 * @param {string[]} enabled
 */
function checkUnitPaths(rootfs, enabled) {
  // Files a site may add and the gateway runs without (the unit says so beside each).
  const optional = new Set(['/etc/harbor-gateway/catalogue.yaml']);
  const written = new Set([
    ...SECRETS.map((secret) => `/${secretFile(secret)}`),
    ...STORED_SECRETS.map(({ credential }) => `/${credstoreFile(credential)}`),
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
            if (/^\/(opt|usr|etc|bin|sbin|lib)\//.test(path) && !optional.has(path) && !existsInImage(path))
              missing.push(`${path} (${key}= of ${basename(file)})`);
          }
        }
      }
    }
  }
  if (missing.length > 0) throw new Error(`units refer to what the image does not have:\n  ${missing.join('\n  ')}`);
}
