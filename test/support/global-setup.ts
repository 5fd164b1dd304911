import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { QUESTDB_SMALL_TABLE_SETTINGS, startQuestDb, type QuestDbServer } from '../../scripts/lib/questdb.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    questdbUrl: string;
    questdbPgPort: number;
    bundlePath: string;
  }
}

interface Started {
  questdb: QuestDbServer;
  dataDir: string;
  bundlePath: string;
  runTempDir: string;
}

interface Shared {
  started: Promise<Started>;
  users: number;
}

// Vitest loads this file once per project, in one process: the integration and deploy projects
// share one QuestDB, one build and one temporary directory through this process-wide slot.
const SLOT = Symbol.for('harbor-gateway.test-questdb');
const slots = globalThis as { [SLOT]?: Shared };

async function start(): Promise<Started> {
  const root = join(import.meta.dirname, '..', '..');
  execFileSync(process.execPath, [join(root, 'build.mjs')], { cwd: root, stdio: 'inherit' });
  const runTempDir = mkdtempSync(join(tmpdir(), 'harbor-test-run-'));
  process.env['TMPDIR'] = runTempDir;
  const dataDir = mkdtempSync(join(runTempDir, 'harbor-questdb-'));
  const questdb = await startQuestDb({ dataDir, env: QUESTDB_SMALL_TABLE_SETTINGS });
  return { questdb, dataDir, bundlePath: join(root, 'dist', 'gateway.mjs'), runTempDir };
}

/**
 * One QuestDB for the whole run (tests use their own tables), a fresh build of the bundle, and a
 * temporary directory of the run's own that the test processes inherit as TMPDIR: what is left in
 * it at the end was left by this run, whatever other runs on the machine do meanwhile.
 */
export async function setup(project: TestProject): Promise<void> {
  const shared = slots[SLOT] ?? { started: start(), users: 0 };
  slots[SLOT] = shared;
  shared.users += 1;
  const { questdb, bundlePath } = await shared.started;
  project.provide('questdbUrl', questdb.httpUrl);
  project.provide('questdbPgPort', questdb.pgPort);
  project.provide('bundlePath', bundlePath);
}

/** Stops QuestDB, then fails the run when a test left something in the run's temporary directory. */
export async function teardown(): Promise<void> {
  const shared = slots[SLOT];
  if (shared === undefined || --shared.users > 0) return;
  delete slots[SLOT];
  const { questdb, dataDir, runTempDir } = await shared.started;
  await questdb.stop();
  rmSync(dataDir, { recursive: true, force: true });
  const left = readdirSync(runTempDir);
  rmSync(runTempDir, { recursive: true, force: true });
  if (left.length > 0) {
    // vitest reports an error thrown here but still exits 0; the exit code is what CI reads.
    process.exitCode = 1;
    throw new Error(
      `tests left ${left.length} entries in the temporary directory (each test must remove what it makes): ${left.sort().join(', ')}`,
    );
  }
}
