import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { startQuestDb, type QuestDbServer } from '../../scripts/lib/questdb.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    questdbUrl: string;
    questdbPgPort: number;
    bundlePath: string;
  }
}

let questdb: QuestDbServer | undefined;
let dataDir: string | undefined;

/** One QuestDB for the whole run (tests use their own tables) and a fresh build of the bundle. */
export async function setup(project: TestProject): Promise<void> {
  const root = join(import.meta.dirname, '..', '..');
  execFileSync(process.execPath, [join(root, 'build.mjs')], { cwd: root, stdio: 'inherit' });
  dataDir = mkdtempSync(join(tmpdir(), 'harbor-questdb-'));
  questdb = await startQuestDb({ dataDir });
  project.provide('questdbUrl', questdb.httpUrl);
  project.provide('questdbPgPort', questdb.pgPort);
  project.provide('bundlePath', join(root, 'dist', 'gateway.mjs'));
}

export async function teardown(): Promise<void> {
  await questdb?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}
