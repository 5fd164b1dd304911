// The long run of the subscriber's exactly-once rounds: `npm run test:faults:subscriber
// [-- --rounds N] [--burst N] [--broker-restarts N]` (defaults 20, 3,000 and 5), in both durability
// modes, then the same rounds at QoS 1 as a control. Builds the bundle and starts its own QuestDB.
import { runWithQuestDb } from './long-run.mjs';
import { runSubscriberOnceFaults } from './subscriber-once.mjs';

/** @param {string} name @param {number} fallback */
const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};

await runWithQuestDb('subscriber-once', (run) =>
  runSubscriberOnceFaults({
    rounds: arg('--rounds', 20),
    burst: arg('--burst', 3000),
    brokerRestarts: arg('--broker-restarts', 5),
    durabilities: ['power-loss', 'process-crash'],
    control: true,
    ...run,
  }),
);
