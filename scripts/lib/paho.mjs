// paho-mqtt, the Eclipse Python client, from PyPI into a virtualenv the project makes in its cache
// (one per version, renamed into place when complete, so concurrent runs never use half of one).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from './paths.mjs';

export const PAHO_VERSION = '2.2.0';

/** The virtualenv's python, with paho-mqtt installed. @returns {string} */
export function pahoPython() {
  const venv = join(cacheDir(), `venv-paho-mqtt-${PAHO_VERSION}`);
  const python = join(venv, 'bin', 'python');
  if (existsSync(python)) return python;
  // Made aside and renamed into place: only bin/python is used, which finds its packages beside itself.
  const work = mkdtempSync(join(cacheDir(), `venv-paho-mqtt-${PAHO_VERSION}.part-`));
  try {
    run('python3', ['-m', 'venv', work]);
    run(join(work, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', `paho-mqtt==${PAHO_VERSION}`]);
    renameSync(work, venv);
  } catch (error) {
    rmSync(work, { recursive: true, force: true });
    // Another run finished first: use its virtualenv.
    if (!existsSync(python)) throw error;
  }
  return python;
}

/** @param {string} command @param {string[]} args */
function run(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 300_000 });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${result.stderr || result.error?.message}`);
}
