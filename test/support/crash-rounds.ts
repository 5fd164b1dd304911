import { inject } from 'vitest';
import { runCrashConsistency } from '../../scripts/lib/crash-consistency.mjs';

type CrashOptions = Parameters<typeof runCrashConsistency>[0];

/** A few rounds of kill -9 under load against the suite's QuestDB and bundle; `npm run test:faults` runs many. */
export function crashRounds(
  durability: 'process-crash' | 'power-loss',
  options: Partial<CrashOptions> = {},
): ReturnType<typeof runCrashConsistency> {
  return runCrashConsistency({
    rounds: 3,
    durability,
    questdbUrl: inject('questdbUrl'),
    bundlePath: inject('bundlePath'),
    clients: 4,
    ...options,
  });
}
