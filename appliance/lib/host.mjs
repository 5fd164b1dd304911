// Host side of the appliance build and check: Debian packages they need, run as root, and small
// process helpers. Tools come from Debian's archive through apt-get, never by hand.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from '../../scripts/lib/paths.mjs';

/** The repository root. */
export const repoRoot = join(import.meta.dirname, '..', '..');

/** ~/.cache/harbor-gateway/appliance: the arm64 sysroot and cross-built native module live here. */
export const applianceCache = () => join(cacheDir(), 'appliance');

/**
 * Runs a command, streaming its output; throws with the command line when it fails.
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, quiet?: boolean, input?: string }} [options]
 */
export function run(command, args, options = {}) {
  const stdin = options.input === undefined ? 'ignore' : 'pipe';
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: options.quiet ? [stdin, 'pipe', 'pipe'] : [stdin, 'inherit', 'inherit'],
    input: options.input,
    encoding: 'utf8',
  });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = options.quiet ? `\n${result.stdout ?? ''}${result.stderr ?? ''}`.slice(-4000) : '';
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}${output}`);
  }
  return result.stdout ?? '';
}

/** Output of a command that must succeed, trimmed. */
export const output = (/** @type {string} */ command, /** @type {string[]} */ args) => run(command, args, { quiet: true }).trim();

/** A command on PATH, or a file named by its absolute path. */
const onPath = (/** @type {string} */ command) =>
  command.startsWith('/')
    ? existsSync(command)
    : (process.env['PATH'] ?? '').split(':').some((dir) => dir !== '' && existsSync(join(dir, command)));

/**
 * Installs the Debian packages whose commands are missing. Needs root, like the chroot and the
 * loop-free image assembly after it.
 * @param {Record<string, string>} commands  command (or absolute path) -> Debian package that provides it
 */
export function ensureHostPackages(commands) {
  const missing = [
    ...new Set(
      Object.entries(commands)
        .filter(([command]) => !onPath(command))
        .map(([, pkg]) => pkg),
    ),
  ];
  if (missing.length === 0) return;
  requireRoot(`install ${missing.join(' ')}`);
  process.stdout.write(`installing host packages: ${missing.join(' ')}\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Other tools may be installing at the same moment: wait for dpkg's lock rather than fail on it.
  const lockWait = ['-o', 'DPkg::Lock::Timeout=600'];
  run('apt-get', [...lockWait, 'update', '-qq'], { env });
  run('apt-get', [...lockWait, 'install', '-y', '-qq', '--no-install-recommends', ...missing], { env });
}

/** arm64 programs run through binfmt_misc and qemu-user-static: maintainer scripts, the board's Node. */
export function ensureBinfmt() {
  const entry = '/proc/sys/fs/binfmt_misc/qemu-aarch64';
  if (existsSync(entry)) return;
  if (!existsSync('/proc/sys/fs/binfmt_misc/register')) run('mount', ['-t', 'binfmt_misc', 'binfmt_misc', '/proc/sys/fs/binfmt_misc']);
  run('update-binfmts', ['--enable', 'qemu-aarch64']);
  if (!existsSync(entry)) throw new Error('qemu-aarch64 is not registered with binfmt_misc; arm64 programs cannot run');
}

export function requireRoot(/** @type {string} */ why) {
  if (process.getuid?.() !== 0) throw new Error(`must run as root to ${why} (sudo)`);
}

/** Seconds since start, for the timing lines of the build and the check. */
export function stopwatch() {
  const started = process.hrtime.bigint();
  return () => Number((process.hrtime.bigint() - started) / 1_000_000n) / 1000;
}
