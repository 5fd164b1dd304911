// What every long fault run does around its rounds: builds the bundle, starts a QuestDB of its own
// in a temporary directory, runs, stops QuestDB and removes its data, and exits 0 only if it passed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../lib/paths.mjs';
import { startQuestDb } from '../lib/questdb.mjs';

/** A log line with its time, on stdout. @param {string} line */
export const log = (line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);

/**
 * @param {string} label names the QuestDB's temporary directory
 * @param {(run: { questdbUrl: string, bundlePath: string, log: (line: string) => void }) => Promise<boolean>} run
 */
export async function runWithQuestDb(label, run) {
  execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
  const dataDir = mkdtempSync(join(tmpdir(), `harbor-${label}-qdb-`));
  const questdb = await startQuestDb({ dataDir });
  let passed = false;
  try {
    passed = await run({ questdbUrl: questdb.httpUrl, bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), log });
  } finally {
    await questdb.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  process.exit(passed ? 0 : 1);
}
