import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { startQuestDb, type QuestDbServer } from '../../scripts/questdb.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    questdbUrl: string;
    questdbPgPort: number;
    bundlePath: string;
  }
}

interface Shared {
  started: Promise<{ questdb: QuestDbServer; dataDir: string; bundlePath: string }>;
  users: number;
}

// Vitest loads this file once per project, in one process: the integration and deploy projects
// share one QuestDB and one build through this process-wide slot.
const SLOT = Symbol.for('harbor-gateway.test-questdb');
const slots = globalThis as { [SLOT]?: Shared };

async function start(): Promise<{ questdb: QuestDbServer; dataDir: string; bundlePath: string }> {
  const root = join(import.meta.dirname, '..', '..');
  execFileSync(process.execPath, [join(root, 'build.mjs')], { cwd: root, stdio: 'inherit' });
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-questdb-'));
  const questdb = await startQuestDb({ dataDir });
  return { questdb, dataDir, bundlePath: join(root, 'dist', 'gateway.mjs') };
}

/** One QuestDB for the whole run (tests use their own tables) and a fresh build of the bundle. */
export async function setup(project: TestProject): Promise<void> {
  const shared = (slots[SLOT] ??= { started: start(), users: 0 });
  shared.users += 1;
  const { questdb, bundlePath } = await shared.started;
  project.provide('questdbUrl', questdb.httpUrl);
  project.provide('questdbPgPort', questdb.pgPort);
  project.provide('bundlePath', bundlePath);
}

export async function teardown(): Promise<void> {
  const shared = slots[SLOT];
  if (shared === undefined || --shared.users > 0) return;
  delete slots[SLOT];
  const { questdb, dataDir } = await shared.started;
  await questdb.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
