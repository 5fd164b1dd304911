import { configDefaults, defineConfig } from 'vitest/config';

// Projects, so the inner loop needs neither the bundle nor QuestDB: unit (pure modules),
// integration (the gateway against a real QuestDB), deploy (compose, systemd, Grafana, the
// appliance's first boot) and newcomer (the README's quick start in a clean clone). `npm test`
// runs them all: unit first, then integration and deploy one file at a time (vitest keeps a core
// for itself by default), newcomer last.
const integrationSetup = {
  globalSetup: ['test/support/global-setup.ts'],
  setupFiles: ['test/support/property-sizes.ts', 'test/support/temp-dir-cleanup.ts'],
  hookTimeout: 120_000,
  sequence: { groupOrder: 1 },
};
const NEWCOMER = 'test/deploy/newcomer.test.ts';

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 30_000,
    // Tests that need QuestDB must fail, not skip, when it is missing.
    allowOnly: false,
    passWithNoTests: false,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'test/unit/**/*.test.ts'],
          setupFiles: ['test/support/unit-guard.ts', 'test/support/property-sizes.ts', 'test/support/temp-dir-cleanup.ts'],
          // A worker keeps the modules it imported from one file to the next instead of a new
          // process per file, the larger part of a unit run's time; the files share no state
          // (setup files run again for each file). On every core: vitest's own process only waits.
          isolate: false,
          maxWorkers: '100%',
          sequence: { groupOrder: 0 },
        },
      },
      { extends: true, test: { name: 'integration', include: ['test/*.test.ts'], ...integrationSetup } },
      {
        extends: true,
        test: {
          name: 'deploy',
          include: ['test/deploy/**/*.test.ts'],
          exclude: [...configDefaults.exclude, NEWCOMER],
          ...integrationSetup,
        },
      },
      {
        extends: true,
        test: {
          name: 'newcomer',
          include: [NEWCOMER],
          ...integrationSetup,
          // The clone's `npm ci` starts with the run, at the lowest priority, and is done by then.
          globalSetup: [...integrationSetup.globalSetup, 'test/support/newcomer-clone.ts'],
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
