// The long MQTT fault run: `npm run test:powercut:mqtt [-- --rounds N] [--cuts N]` (defaults 25 and
// 50): builds the bundle, starts its own QuestDB, and runs scripts/faults/mqtt-crash.mjs.
import { runMqttFaults } from './mqtt-crash.mjs';
import { runWithQuestDb } from './long-run.mjs';

/** @param {string} name @param {number} fallback */
const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};

await runWithQuestDb('mqtt-faults', (run) => runMqttFaults({ rounds: arg('--rounds', 25), cuts: arg('--cuts', 50), ...run }));
