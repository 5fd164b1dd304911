// What the single-purpose benches (idle, write amplification, batch CPU, Pi budget) share: the
// builds they run (this one, and another to alternate with), a work directory under bench/.work,
// extra environment from `--env NAME=VALUE`, and the load average to print beside every figure.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../scripts/lib/paths.mjs';
import { startQuestDb } from '../../scripts/lib/questdb.mjs';

/** The load average (1, 5, 15 minutes). */
export const loadAverage = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/**
 * This build, and `other` (a bundle's path) first when given.
 * @param {string | undefined} other
 */
export function buildsToRun(other) {
  const builds = [{ name: 'this build', bundle: join(projectRoot, 'dist', 'gateway.mjs') }];
  if (other) builds.unshift({ name: other, bundle: other });
  return builds;
}

/** `NAME=VALUE` pairs as an environment. @param {string[]} pairs */
export const envPairs = (pairs) => Object.fromEntries(pairs.map((pair) => /** @type {[string, string]} */ (pair.split(/=(.*)/s, 2))));

/** A fresh directory under bench/.work. @param {string} prefix */
export function benchWorkDir(prefix) {
  const work = join(projectRoot, 'bench', '.work');
  mkdirSync(work, { recursive: true });
  return mkdtempSync(join(work, prefix));
}

/**
 * What a bench of gateways beside one QuestDB starts with: the builds, the extra environment, a
 * work directory (QuestDB's data in it), a random API key, the load average at the start, QuestDB.
 * @param {string} prefix  of the work directory
 * @param {{ bundle?: string, env: string[] }} args  `--bundle` and `--env`
 */
export async function standaloneBench(prefix, args) {
  const workDir = benchWorkDir(prefix);
  return {
    builds: buildsToRun(args.bundle),
    extraEnv: envPairs(args.env),
    workDir,
    apiKey: randomBytes(24).toString('base64url'),
    loadAtStart: loadAverage(),
    questdb: await startQuestDb({ dataDir: join(workDir, 'questdb') }),
  };
}
