import { defineConfig } from 'vitest/config';

// Three projects, so the inner loop needs neither the bundle nor QuestDB:
// unit (pure modules), integration (the gateway against a real QuestDB), deploy (compose, systemd,
// Grafana, the appliance's first boot). `npm test` runs all three.
const integrationSetup = {
  globalSetup: ['test/support/global-setup.ts'],
  setupFiles: ['test/support/property-sizes.ts'],
  hookTimeout: 120_000,
};

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
          setupFiles: ['test/support/unit-guard.ts', 'test/support/property-sizes.ts'],
        },
      },
      { extends: true, test: { name: 'integration', include: ['test/*.test.ts'], ...integrationSetup } },
      { extends: true, test: { name: 'deploy', include: ['test/deploy/**/*.test.ts'], ...integrationSetup } },
    ],
  },
});
