// The longer site identity runs: `npm run test:site-identity [-- --rounds N] [--seconds S]`
// (default 30 rename rounds and 120 s of two gateways claiming one site; `npm run test:faults`
// runs 5 rounds and 20 s). A site renamed under load at every restart, with every kind of sink,
// and two gateways under one site id at a centre (scripts/faults/site-rename.mjs and
// site-claims.mjs). Builds the bundle, starts its own QuestDB, exits non-zero on any violation.
import { runWithQuestDb } from './long-run.mjs';
import { runSiteClaims } from './site-claims.mjs';
import { runSiteRename } from './site-rename.mjs';

const argument = (/** @type {string} */ name) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
};
const rounds = Number(argument('--rounds') ?? 30);
const seconds = Number(argument('--seconds') ?? 120);

await runWithQuestDb('site-identity', async (run) => {
  const rename = await runSiteRename({ rounds, ...run });
  const { missing, forbidden, strangers, wrongSite, ...figures } = rename.report;
  run.log(
    `site renamed at every restart, every sink: ${rename.pass ? 'PASS' : 'FAIL'} ${JSON.stringify({ ...figures, missing: missing.length, forbidden: forbidden.length, strangers: strangers.length, wrongSite: wrongSite?.length })}`,
  );
  const claims = await runSiteClaims({ seconds, ...run });
  return rename.pass && claims.pass;
});
