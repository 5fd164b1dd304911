// Whose gateway an image carries: this tree's, or an earlier release's, built from the commit that
// CHANGELOG.md records for it (tags do not travel with every clone). The appliance around it (base
// root, boot loader, first boot, updater) is always this tree's: an earlier release's image built
// here is that release's gateway on today's appliance, which is what an update starts from.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { previousReleaseBundle } from '../../scripts/lib/previous-release.mjs';
import { releases } from '../../scripts/lib/releases.mjs';
import { output, repoRoot } from './host.mjs';

/**
 * @typedef {object} ReleaseSource
 * @property {string} dir             a tree with package.json, package-lock.json, dist/gateway.mjs and node_modules
 * @property {string} version         the image's and bundle's version
 * @property {string} gatewayVersion  what the gateway reports: the release's version (its package.json's for a release)
 * @property {string} commit          the gateway's commit
 * @property {number} queueFormat     the queue file format the gateway writes
 * @property {boolean} released       a release recorded in CHANGELOG.md, or a tree in between
 */

/** The queue format a tree's gateway writes: the newest step of its queue-format.ts. */
export function queueFormatOfTree(/** @type {string} */ dir) {
  const source = join(dir, 'src/queue/queue-format.ts');
  if (!existsSync(source)) throw new Error(`${source} is missing`);
  const versions = [...readFileSync(source, 'utf8').matchAll(/^\s+version: (\d+),$/gm)].map((m) => Number(m[1]));
  if (versions.length === 0) throw new Error(`no format steps in ${source}`);
  return Math.max(...versions);
}

/**
 * This tree, as its bundle's version: the package version when HEAD is the commit CHANGELOG.md
 * records for it, else the next minor version's development build (0.5.0-dev.N, N the commit
 * count), which orders after the last release and before the one it becomes.
 * @returns {ReleaseSource}
 */
export function currentSource() {
  const { version, commit, released } = currentVersion();
  // The image's gateway is built for the release (stage-gateway.mjs) and reports its version.
  return { dir: repoRoot, version, gatewayVersion: version, commit, queueFormat: queueFormatOfTree(repoRoot), released };
}

/** This tree's bundle version (see currentSource), without building anything. */
export function currentVersion() {
  const gatewayVersion = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).version;
  const commit = output('git', ['-C', repoRoot, 'rev-parse', 'HEAD']);
  const released = releases().some((release) => release.version === gatewayVersion && release.commit === commit);
  const [major = 0, minor = 0] = gatewayVersion.split('.').map(Number);
  const count = output('git', ['-C', repoRoot, 'rev-list', '--count', 'HEAD']);
  return { version: released ? gatewayVersion : `${major}.${minor + 1}.0-dev.${count}`, gatewayVersion, commit, released };
}

/**
 * A recorded release, built from its commit (cached by scripts/lib/previous-release.mjs).
 * @returns {ReleaseSource}
 */
export function releaseSource(/** @type {string} */ version) {
  const release = releases().find((r) => r.version === version);
  if (release === undefined) throw new Error(`CHANGELOG.md records no release ${version}`);
  const built = previousReleaseBundle(release);
  if ('unavailable' in built) throw new Error(built.unavailable);
  const dir = dirname(dirname(built.bundle));
  if (!existsSync(join(dir, 'src/queue/queue-format.ts'))) throw new Error(`${dir} lacks the release's sources`);
  return { dir, version, gatewayVersion: version, commit: release.commit, queueFormat: release.queueFormat, released: true };
}
