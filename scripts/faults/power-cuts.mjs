// The long power-cut run: `npm run test:powercut [-- --cuts N] [--model M[,M...]]
// [--entries per-directory|ext4] [--modes power-loss,process-crash]` (default 200 cuts per
// durability mode, the `tear` model, entries durable per directory fsync, both modes). The models
// are scripts/faults/power-cut.mjs's DISK_MODELS: tear, subset, fsync-eio, enospc, lying-flush.
// Builds the bundle, starts its own QuestDB, exits non-zero when a model or mode breaks its promise.
import { DISK_MODELS, runPowerCuts } from './power-cut.mjs';
import { runWithQuestDb } from './long-run.mjs';

const argument = (/** @type {string} */ name) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
};
const cuts = Number(argument('--cuts') ?? 200);
const models = (argument('--model') ?? 'tear').split(',');
for (const model of models) {
  if (!(model in DISK_MODELS)) throw new Error(`--model takes ${Object.keys(DISK_MODELS).join(', ')}, not ${model}`);
}
const entries = argument('--entries') ?? 'per-directory';
if (entries !== 'ext4' && entries !== 'per-directory') throw new Error(`--entries must be ext4 or per-directory, not ${entries}`);
const modes = /** @type {('power-loss' | 'process-crash')[]} */ ((argument('--modes') ?? 'process-crash,power-loss').split(','));
for (const mode of modes) {
  if (mode !== 'power-loss' && mode !== 'process-crash') throw new Error(`--modes takes power-loss and process-crash, not ${mode}`);
}

await runWithQuestDb('powercut', (run) => runPowerCuts({ cuts, models, entries, modes, ...run }));
