// The arm64 sysroot: Debian's nodejs and libnode-dev for arm64, unpacked without running any
// maintainer script (mmdebstrap's extract variant), so no emulation is needed to make it. It is
// the Node the image runs, the headers better-sqlite3 is cross-built against, and the root the
// check runs the gateway in. Cached as a tarball; --refresh fetches the current packages again.
import { existsSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { DEBIAN_SOURCES, SUITE, SYSROOT_PACKAGES, digest } from './debian.mjs';
import { applianceCache, run } from './host.mjs';

/**
 * The cached sysroot tarball, made when missing.
 * @param {{ refresh?: boolean }} [options]
 */
export function sysrootTarball(options = {}) {
  const dir = applianceCache();
  mkdirSync(dir, { recursive: true });
  const tarball = join(dir, `sysroot-arm64-${SUITE}-${digest({ DEBIAN_SOURCES, SYSROOT_PACKAGES })}.tar`);
  if (options.refresh) rmSync(tarball, { force: true });
  if (existsSync(tarball)) return tarball;
  const partial = `${tarball}.${process.pid}.part`;
  run('mmdebstrap', [
    '--quiet',
    '--variant=extract',
    '--architectures=arm64',
    `--include=${SYSROOT_PACKAGES.join(',')}`,
    '--format=tar',
    SUITE,
    partial,
    ...DEBIAN_SOURCES,
  ]);
  renameSync(partial, tarball);
  return tarball;
}

/**
 * Unpacks the sysroot into dir (fresh each time, so a run never sees an earlier run's files).
 * @param {string} dir
 * @param {{ refresh?: boolean }} [options]
 */
export function unpackSysroot(dir, options = {}) {
  const tarball = sysrootTarball(options);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  run('tar', ['-xf', tarball, '-C', dir]);
  // Extracted packages do not include base-files' merged-/usr links; the loader is looked up at /lib.
  for (const link of ['bin', 'sbin', 'lib']) if (!existsSync(join(dir, link))) symlinkSync(`usr/${link}`, join(dir, link));
  return dir;
}

/** Version of the target Node from its headers, e.g. { version: '20.19.2', modules: 115 }. */
export function targetNode(/** @type {string} */ sysroot) {
  const header = run('cat', [join(sysroot, 'usr/include/node/node_version.h')], { quiet: true });
  const number = (/** @type {string} */ name) => Number(new RegExp(`#define ${name} (\\d+)`).exec(header)?.[1]);
  const version = `${number('NODE_MAJOR_VERSION')}.${number('NODE_MINOR_VERSION')}.${number('NODE_PATCH_VERSION')}`;
  const modules = number('NODE_MODULE_VERSION');
  if (!Number.isInteger(modules)) throw new Error(`no NODE_MODULE_VERSION in the sysroot's node_version.h`);
  return { version, modules };
}
