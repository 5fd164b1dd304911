// The long MQTT fault run: `npm run test:powercut:mqtt [-- --rounds N] [--cuts N]` (defaults 25 and
// 50): builds the bundle, starts its own QuestDB, and runs scripts/faults/mqtt-crash.mjs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../lib/paths.mjs';
import { startQuestDb } from '../lib/questdb.mjs';
import { runMqttFaults } from './mqtt-crash.mjs';

/** @param {string} name @param {number} fallback */
const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const log = (/** @type {string} */ line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);

execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
const dataDir = mkdtempSync(join(tmpdir(), 'harbor-mqtt-faults-qdb-'));
const questdb = await startQuestDb({ dataDir });
let passed = false;
try {
  passed = await runMqttFaults({
    rounds: arg('--rounds', 25),
    cuts: arg('--cuts', 50),
    questdbUrl: questdb.httpUrl,
    bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
    log,
  });
} finally {
  await questdb.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(passed ? 0 : 1);
