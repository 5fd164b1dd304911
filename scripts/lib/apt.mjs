// Installs Debian packages that tests and tools need, when what they provide is missing. Several
// test files may ask at once, so apt waits for dpkg's lock instead of failing on it.
//   import { aptInstall } from '../scripts/lib/apt.mjs'; aptInstall(['libmbedtls-dev'], '/usr/include/mbedtls/ssl.h')
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const LOCK_WAIT = ['-o', 'DPkg::Lock::Timeout=600'];
let updated = false;

/**
 * Installs `packages` unless `provides` (a file path) already exists. Needs root, as the
 * machine's other tooling does; says what to install otherwise.
 * @param {string[]} packages
 * @param {string} provides
 */
export function aptInstall(packages, provides) {
  if (existsSync(provides)) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`${provides} is missing: install Debian packages ${packages.join(' ')} (or run as root so they are installed)`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!updated) {
    execFileSync('apt-get', [...LOCK_WAIT, 'update', '-qq'], { stdio: 'inherit', env });
    updated = true;
  }
  execFileSync('apt-get', [...LOCK_WAIT, 'install', '-y', '-qq', '--no-install-recommends', ...packages], { stdio: 'inherit', env });
  if (!existsSync(provides)) throw new Error(`installed ${packages.join(' ')} but ${provides} is still missing`);
}
