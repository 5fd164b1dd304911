// What the update test offers the board besides a release's own bundle, made from that bundle on
// the host: the same content signed by a key the board does not trust, and a release whose gateway
// cannot start. Also finds (and, when missing, builds) the release folders of appliance:build.
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { manifestText, signBundle } from './bundle.mjs';
import { applianceCache, output, repoRoot, run } from './host.mjs';
import { currentVersion } from './release-source.mjs';
import { makeKeyPair, signingMaterial } from './signing.mjs';
import { emulatedBoardDropIns } from './vm.mjs';

/**
 * A release folder written by `appliance:build --kernel debian --without-grafana --test-keys`: this
 * tree's, or an earlier release's (version). Built when missing and `build` is true.
 * @param {{ version?: string, dir?: string, build?: boolean }} options
 */
export function releaseFolder({ version, dir, build = true }) {
  if (dir !== undefined) {
    // A folder given by its path: its name says the release.
    const name = basename(dir);
    const found = /^harbor-gateway-(.+)-debian-arm64-without-grafana$/.exec(name);
    if (found === null || !existsSync(join(dir, `${name}.raucb`)) || !existsSync(join(dir, `${name}.img`)))
      throw new Error(`${dir} is not a release folder of appliance:build --kernel debian --without-grafana --no-compress`);
    return { name, version: String(found[1]), image: join(dir, `${name}.img`), bundle: join(dir, `${name}.raucb`), folder: dir };
  }
  const wanted = version ?? currentVersion().version;
  const name = `harbor-gateway-${wanted}-debian-arm64-without-grafana`;
  const folder = join(repoRoot, 'dist/appliance', name);
  if (!existsSync(join(folder, `${name}.raucb`)) && build) {
    run('nice', [
      '-n',
      '10',
      process.execPath,
      join(repoRoot, 'appliance/build.mjs'),
      '--kernel',
      'debian',
      '--without-grafana',
      '--test-keys',
      '--no-compress',
      ...(version === undefined ? [] : ['--release', version]),
    ]);
  }
  return releaseFolder({ dir: folder, build: false });
}

/** A CA and signing key the board does not trust. */
export const untrustedKeys = (/** @type {string} */ work) => {
  const dir = makeKeyPair(join(work, 'untrusted-keys'), 'Untrusted');
  return {
    key: join(dir, 'signing.key.pem'),
    cert: join(dir, 'signing.cert.pem'),
    keyring: join(dir, 'ca.cert.pem'),
    test: true,
    fingerprint: '',
  };
};

/** A gateway bundle that fails at start as a bad release does: it throws before it listens. */
const BROKEN_GATEWAY = "throw new Error('this release cannot start: a bundle made by the update test');\n";

/**
 * The content of a bundle, signed again: by other keys, or with another version and, when asked,
 * a gateway that cannot start; with `emulated`, the slot carries the emulated board's drop-ins
 * (lib/vm.mjs, emulatedBoardDropIns).
 * @param {{ from: string, to: string, work: string, signing?: import('./signing.mjs').Signing, version?: string,
 *   description?: string, breakGateway?: boolean, emulated?: boolean }} options
 */
export function rebundle({ from, to, work, signing, version, description, breakGateway = false, emulated = false }) {
  const test = signingMaterial({ testKeys: true });
  const cached = signing === undefined ? rebundleCacheFile({ from, work, version, description, breakGateway, emulated }) : undefined;
  if (cached !== undefined && existsSync(cached)) {
    copyFileSync(cached, to);
    return to;
  }
  const content = join(work, 'rebundle');
  rmSync(content, { recursive: true, force: true });
  run('rauc', ['extract', `--keyring=${test.keyring}`, from, content], { quiet: true });
  const manifestFile = join(content, 'manifest.raucm');
  let manifest = readFileSync(manifestFile, 'utf8');
  if (version !== undefined) manifest = manifest.replace(/^version=.*$/m, `version=${version}`);
  if (description !== undefined) manifest = manifest.replace(/^description=.*$/m, `description=${description}`);
  writeFileSync(manifestFile, manifest);
  if (breakGateway) {
    const file = join(work, 'broken-gateway.mjs');
    writeFileSync(file, BROKEN_GATEWAY);
    const image = join(content, 'rootfs.ext4');
    run('debugfs', ['-w', '-R', 'rm /opt/harbor-gateway/dist/gateway.mjs', image], { quiet: true });
    run('debugfs', ['-w', '-R', `write ${file} /opt/harbor-gateway/dist/gateway.mjs`, image], { quiet: true });
  }
  if (emulated) {
    for (const request of emulatedBoardDropIns(work)) run('debugfs', ['-w', '-R', request, join(content, 'rootfs.ext4')], { quiet: true });
  }
  mkdirSync(join(to, '..'), { recursive: true });
  signBundle({ content, bundle: to, signing: signing ?? test });
  rmSync(content, { recursive: true, force: true });
  if (cached !== undefined) {
    mkdirSync(join(cached, '..'), { recursive: true });
    copyFileSync(to, `${cached}.part`);
    renameSync(`${cached}.part`, cached);
  }
  return to;
}

/**
 * Where rebundle keeps a bundle re-signed with the test keys: signing hundreds of megabytes under
 * emulation load takes minutes, so the same change of the same bundle is made once. Named by the
 * digests of the bundle, the test certificate and the change (the drop-ins by their content).
 * @param {{ from: string, work: string, version?: string, description?: string, breakGateway: boolean, emulated: boolean }} options
 */
export function rebundleCacheFile({ from, work, version, description, breakGateway, emulated }) {
  const dropIns = emulated
    ? emulatedBoardDropIns(work).map((request) => {
        const [verb, file, ...rest] = request.split(' ');
        return verb === 'write' ? `write ${readFileSync(String(file), 'utf8')} ${rest.join(' ')}` : request;
      })
    : [];
  const key = createHash('sha256')
    .update(output('sha256sum', [from]).split(' ')[0] ?? '')
    .update(readFileSync(signingMaterial({ testKeys: true }).cert))
    .update(JSON.stringify({ version, description, breakGateway, gateway: breakGateway ? BROKEN_GATEWAY : '', dropIns }))
    .digest('hex')
    .slice(0, 16);
  return join(applianceCache(), 'test-bundles', `${key}.raucb`);
}

/**
 * A small bundle of this board's kind and a newer version, signed by a key the board does not
 * trust: what a refusal of the signature is tested with, without moving a release's hundreds of
 * megabytes. Its slot image is a small ext4 file system holding random bytes: an empty one squashes
 * to less than the 4 KiB RAUC requires of a verity bundle.
 * @param {{ to: string, work: string, version: string }} options
 */
export function untrustedSmallBundle({ to, work, version }) {
  const content = join(work, 'small-bundle');
  rmSync(content, { recursive: true, force: true });
  const files = join(content, 'files');
  mkdirSync(files, { recursive: true });
  writeFileSync(join(files, 'random'), randomBytes(64 * 1024));
  run('mkfs.ext4', ['-q', '-F', '-L', 'harbor-root', '-d', files, join(content, 'rootfs.ext4'), '8M']);
  rmSync(files, { recursive: true });
  writeFileSync(join(content, 'manifest.raucm'), manifestText({ version, description: 'signed by a key the board does not trust' }));
  mkdirSync(join(to, '..'), { recursive: true });
  signBundle({ content, bundle: to, signing: untrustedKeys(work) });
  rmSync(content, { recursive: true, force: true });
  return to;
}
