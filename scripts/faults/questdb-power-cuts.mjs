// Power cuts of the gateway and QuestDB together: `npm run test:powercut:questdb [-- --cuts N]
// [--entries per-directory|ext4] [--model realistic|strict] [--round-ms MIN-MAX]
// [--replay-window-ms N]` (default 10 cuts, entry changes durable as on ext4, the kernel's writeback
// by age, rounds of 1 to 45 s, the gateway's default REPLAY_WINDOW_MS). Builds the bundle and exits
// non-zero when a reading answered 2xx is missing afterwards.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from '../lib/paths.mjs';
import { runQuestDbPowerCuts } from './questdb-power-cut.mjs';

const argument = (/** @type {string} */ name) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
};
const cuts = Number(argument('--cuts') ?? 10);
const entries = argument('--entries') ?? 'ext4';
if (entries !== 'ext4' && entries !== 'per-directory') throw new Error(`--entries must be ext4 or per-directory, not ${entries}`);
const model = argument('--model') ?? 'realistic';
if (model !== 'realistic' && model !== 'strict') throw new Error(`--model must be realistic or strict, not ${model}`);
const [min, max] = (argument('--round-ms') ?? '1000-45000').split('-').map(Number);
if (!Number.isFinite(min) || !Number.isFinite(max) || /** @type {number} */ (min) > /** @type {number} */ (max))
  throw new Error('--round-ms takes MIN-MAX in milliseconds');
const windowArgument = argument('--replay-window-ms');
const replayWindowMs = windowArgument === undefined ? undefined : Number(windowArgument);
const log = (/** @type {string} */ line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);

execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
const passed = await runQuestDbPowerCuts({
  cuts,
  entries,
  model,
  roundMs: { min: /** @type {number} */ (min), max: /** @type {number} */ (max) },
  ...(replayWindowMs === undefined ? {} : { replayWindowMs }),
  bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
  log,
});
process.exit(passed ? 0 : 1);
