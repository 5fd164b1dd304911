// Stages /opt/harbor-gateway for the arm64 appliance as harbor-gateway.service expects it: the
// esbuild bundle in dist/ and better-sqlite3 in node_modules/, its native module cross-compiled for
// arm64 against the target Node's own headers (Debian's
// libnode-dev from the sysroot). Cross-compiling takes about a minute on one core; compiling under
// emulation would take many. The module is cached by the inputs that decide its bytes.
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { readBytes } from '../board/files.mjs';
import { build } from 'esbuild';
import { bundleOptions } from '../../build.mjs';
import { digest } from './debian.mjs';
import { applianceCache, output, repoRoot, run } from './host.mjs';
import { targetNode } from './sysroot.mjs';

/** Host commands the cross-build needs, by the Debian package that has them. */
export const CROSS_TOOLS = {
  'aarch64-linux-gnu-g++': 'crossbuild-essential-arm64',
  make: 'make',
  python3: 'python3',
};

/** Packages the bundle loads at run time: better-sqlite3 (external to the bundle) and what it requires. */
const RUNTIME_MODULES = ['better-sqlite3', 'bindings', 'file-uri-to-path'];
const EM_AARCH64 = 183;

/** A cpSync filter that leaves out the named top-level entries of the copied folder. */
const without = (/** @type {string} */ from, /** @type {string[]} */ names) => (/** @type {string} */ path) =>
  !names.includes(relative(from, path).split(sep)[0] ?? '');

/** ELF machine number of a shared object (183 = AArch64). */
export function elfMachine(/** @type {string} */ path) {
  const header = readBytes(path, 20, 0);
  if (header.toString('latin1', 1, 4) !== 'ELF') throw new Error(`${path} is not an ELF file`);
  return header.readUInt16LE(18);
}

/**
 * better_sqlite3.node for arm64, cross-built once per better-sqlite3 version, target Node and compiler.
 * @param {string} sysroot
 * @param {string} [tree]  the tree whose node_modules/better-sqlite3 is built (an earlier release's)
 */
export function crossBuildBetterSqlite3(sysroot, tree = repoRoot) {
  const source = join(tree, 'node_modules', 'better-sqlite3');
  if (!existsSync(join(source, 'package.json'))) throw new Error('node_modules/better-sqlite3 is missing: run npm ci first');
  const { version } = JSON.parse(readFileSync(join(source, 'package.json'), 'utf8'));
  const node = targetNode(sysroot);
  const compiler = output('aarch64-linux-gnu-g++', ['-dumpfullversion']);
  const key = digest({ version, node, compiler });
  const cached = join(applianceCache(), `better-sqlite3-${version}-node${node.modules}-arm64-${key}`, 'better_sqlite3.node');
  if (existsSync(cached)) return cached;

  const work = join(applianceCache(), `build-better-sqlite3-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  cpSync(source, work, { recursive: true, filter: without(source, ['build']) });
  const nodeGyp = join(output('npm', ['root', '-g']), 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  /** @type {NodeJS.ProcessEnv} */
  const env = {
    ...process.env,
    CC: 'aarch64-linux-gnu-gcc',
    CXX: 'aarch64-linux-gnu-g++',
    LINK: 'aarch64-linux-gnu-g++',
    AR: 'aarch64-linux-gnu-ar',
  };
  // The host's npm points node-gyp at the host Node's headers; the target's are given below.
  delete env['npm_config_nodedir'];
  process.stdout.write(`cross-compiling better-sqlite3 ${version} for arm64 against Node ${node.version} headers\n`);
  run(process.execPath, [nodeGyp, 'rebuild', '--release', '--arch=arm64', `--nodedir=${join(sysroot, 'usr')}`, '--jobs=2', '--silent'], {
    cwd: work,
    env,
    quiet: true,
  });
  const built = join(work, 'build', 'Release', 'better_sqlite3.node');
  if (elfMachine(built) !== EM_AARCH64) throw new Error(`${built} is not an arm64 module`);
  mkdirSync(join(cached, '..'), { recursive: true });
  copyFileSync(built, cached);
  rmSync(work, { recursive: true, force: true });
  return cached;
}

/**
 * Writes the gateway's install tree (what goes to /opt/harbor-gateway), with the README the unit's
 * Documentation= points at, from a tree whose bundle is built (an earlier release's, given), or
 * this tree's bundle built for the release: the gateway reports the release's version (`/status`,
 * the console, the health rows), which between releases is a development build's, not the package's.
 * The installs of the README's Debian-board steps (npm ci on the board) hold the same runtime files and more.
 * @param {{ sysroot: string, destination: string, tree?: string, version: string }} options
 */
export async function stageGateway({ sysroot, destination, tree, version }) {
  const from = tree ?? repoRoot;
  const module = crossBuildBetterSqlite3(sysroot, from);
  rmSync(destination, { recursive: true, force: true });
  mkdirSync(join(destination, 'dist'), { recursive: true });
  if (tree === undefined)
    await build({
      ...bundleOptions,
      // The entry and its chunks (build.mjs); the maps stay with the build tree, the card carries the bundle and its licences.
      outdir: join(destination, 'dist'),
      sourcemap: false,
      define: { ...bundleOptions.define, __GATEWAY_VERSION__: JSON.stringify(version) },
    });
  else {
    for (const file of ['gateway.mjs', 'gateway.mjs.LEGAL.txt'])
      if (existsSync(join(from, 'dist', file))) copyFileSync(join(from, 'dist', file), join(destination, 'dist', file));
    // The modules the entry loads when it needs them, without their source maps (a release built before them has none).
    const chunks = join(from, 'dist', 'chunks');
    if (existsSync(chunks))
      cpSync(chunks, join(destination, 'dist', 'chunks'), { recursive: true, filter: (path) => !path.endsWith('.map') });
  }
  copyFileSync(join(from, 'README.md'), join(destination, 'README.md'));
  for (const name of RUNTIME_MODULES) {
    const packageDir = join(from, 'node_modules', name);
    // The host's build of the native module and the C sources stay behind; the arm64 module goes in below.
    cpSync(packageDir, join(destination, 'node_modules', name), { recursive: true, filter: without(packageDir, ['build', 'deps', 'src']) });
  }
  const release = join(destination, 'node_modules', 'better-sqlite3', 'build', 'Release');
  mkdirSync(release, { recursive: true });
  copyFileSync(module, join(release, 'better_sqlite3.node'));
  return destination;
}
