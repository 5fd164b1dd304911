// The long power-cut run: `npm run test:powercut [-- --cuts N]` (default 200 cuts per durability
// mode). Builds the bundle, starts its own QuestDB, exits non-zero when a mode breaks its promise.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../lib/paths.mjs';
import { startQuestDb } from '../lib/questdb.mjs';
import { runPowerCuts } from './power-cut.mjs';

const cutsArg = process.argv.indexOf('--cuts');
const cuts = cutsArg > 0 ? Number(process.argv[cutsArg + 1]) : 200;
const log = (/** @type {string} */ line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);

execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
const dataDir = mkdtempSync(join(tmpdir(), 'harbor-powercut-qdb-'));
const questdb = await startQuestDb({ dataDir });
let passed = false;
try {
  passed = await runPowerCuts({ cuts, questdbUrl: questdb.httpUrl, bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), log });
} finally {
  await questdb.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(passed ? 0 : 1);
