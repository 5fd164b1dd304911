// The longer fault runs: `npm run test:faults [-- --rounds N] [--cuts N] [--owner-rounds N]`. Builds the
// bundle, starts its own QuestDB, runs crash consistency, kill -9 rounds of a site with local QuestDB,
// upstream and Kafka sinks (the broker killed -9 too), a few power cuts in both durability modes on
// every disk model of scripts/faults/power-cut.mjs (tear, subset, fsync-eio, enospc, lying-flush),
// two gateways started on one data directory under load, a disk filled by the queue itself under load
// and a QuestDB outage under load, the short fleet run (3 sites forwarding to a central gateway and
// Kafka through an uplink cut), a few power cuts of QuestDB with the gateway (strict disk model,
// short rounds: where QuestDB loses acknowledged transactions) and the readings table dropped twice
// under load (QuestDB as shipped, and creating tables over ILP), MQTT QoS 1 publishers and the MQTT
// subscription through kill -9 rounds and power cuts, the subscription's exactly-once rounds (bursts
// of QoS 1 messages into Mosquitto, readings stamped with the receive time, the gateway killed mid-burst
// and the broker restarted), devices pushing through an attack by clients without a device key
// (scripts/faults/abuse.mjs), a site renamed at every restart under load with every kind of sink,
// and two gateways claiming one site at a centre, and exits non-zero on any violation. The long
// subscription run is `npm run test:faults:subscriber`, the long site identity runs `npm run
// test:site-identity`.
// The long power-cut runs are `npm run test:powercut` and `npm run test:powercut:questdb`.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../lib/paths.mjs';
import { startQuestDb } from '../lib/questdb.mjs';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';
import { runAbuse } from './abuse.mjs';
import { runFullDisk } from './full-disk.mjs';
import { runOutage } from './outage.mjs';
import { DISK_MODELS, runPowerCuts } from './power-cut.mjs';
import { runQuestDbPowerCuts } from './questdb-power-cut.mjs';
import { runTableDrop, tableDropPassed } from './table-drop.mjs';
import { runTwoOwners } from './two-owners.mjs';
import { runSiteCrash } from './site-crash.mjs';
import { runMqttFaults } from './mqtt-crash.mjs';
import { runSubscriberOnceFaults } from './subscriber-once.mjs';
import { runSiteClaims } from './site-claims.mjs';
import { runSiteRename } from './site-rename.mjs';

const roundsArg = process.argv.indexOf('--rounds');
const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 25;
const cutsArg = process.argv.indexOf('--cuts');
const cuts = cutsArg > 0 ? Number(process.argv[cutsArg + 1]) : 5;
const ownerRoundsArg = process.argv.indexOf('--owner-rounds');
const ownerRounds = ownerRoundsArg > 0 ? Number(process.argv[ownerRoundsArg + 1]) : 8;
/** The memory bound the gateway must keep during an outage under load (the unit's MemoryMax is 256 MB). */
const MAX_PEAK_RSS_MB = 200;
const log = (/** @type {string} */ line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);

execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
const dataDir = mkdtempSync(join(tmpdir(), 'harbor-faults-qdb-'));
const questdb = await startQuestDb({ dataDir });
let failed = false;
try {
  for (const durability of /** @type {const} */ (['process-crash', 'power-loss'])) {
    const report = await runCrashConsistency({
      rounds,
      durability,
      questdbUrl: questdb.httpUrl,
      bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
      log,
    });
    const violations = report.missing.length + report.forbidden.length + report.strangers.length + report.duplicates;
    log(
      `${durability}: ${violations === 0 ? 'PASS' : 'FAIL'} ${JSON.stringify({ ...report, missing: report.missing.slice(0, 10), forbidden: report.forbidden.slice(0, 10), strangers: report.strangers.slice(0, 10) })}`,
    );
    if (violations > 0) failed = true;
  }
  const site = await runSiteCrash({
    rounds: Math.max(4, Math.round(rounds / 3)),
    questdbUrl: questdb.httpUrl,
    bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
    log,
  });
  const { missing, forbidden, strangers, ...siteFigures } = site.report;
  log(
    `site with local QuestDB, upstream and Kafka, broker killed too: ${site.pass ? 'PASS' : 'FAIL'} ${JSON.stringify({ ...siteFigures, missing: missing.length, forbidden: forbidden.length, strangers: strangers.length })}`,
  );
  if (!site.pass) failed = true;
  const rename = await runSiteRename({ rounds: 5, questdbUrl: questdb.httpUrl, bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), log });
  {
    const { missing, forbidden, strangers, wrongSite, ...figures } = rename.report;
    log(
      `site renamed at every restart, every sink: ${rename.pass ? 'PASS' : 'FAIL'} ${JSON.stringify({ ...figures, missing: missing.length, forbidden: forbidden.length, strangers: strangers.length, wrongSite: wrongSite?.length })}`,
    );
  }
  if (!rename.pass) failed = true;
  const claims = await runSiteClaims({
    seconds: 20,
    questdbUrl: questdb.httpUrl,
    bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
    log,
  });
  if (!claims.pass) failed = true;
  const powerCuts = await runPowerCuts({
    cuts,
    models: Object.keys(DISK_MODELS),
    questdbUrl: questdb.httpUrl,
    bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
    log,
  });
  if (!powerCuts) failed = true;
  const owners = await runTwoOwners({
    rounds: ownerRounds,
    questdbUrl: questdb.httpUrl,
    bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
    log,
  });
  if (!owners.ok) failed = true;
  const fullDisk = await runFullDisk({ questdbUrl: questdb.httpUrl, bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), log });
  if (!fullDisk.ok) failed = true;
  const questdbCuts = await runQuestDbPowerCuts({
    cuts,
    bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
    entries: 'ext4',
    model: 'strict',
    roundMs: { min: 100, max: 800 },
    log,
  });
  if (!questdbCuts) failed = true;
  const outage = await runOutage({ bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), outageMs: 20_000, log });
  const outageOk =
    outage.refused === 0 &&
    outage.readyDuringOutage &&
    outage.backlogDuringOutage > 0 &&
    outage.stored === outage.accepted &&
    outage.distinct === outage.accepted &&
    outage.peakRssMb < MAX_PEAK_RSS_MB;
  log(`QuestDB outage: ${outageOk ? 'PASS' : 'FAIL'} ${JSON.stringify(outage)} (peak RSS bound ${MAX_PEAK_RSS_MB} MB)`);
  if (!outageOk) failed = true;
  for (const mode of /** @type {const} */ (['shipped', 'auto-create'])) {
    const drop = await runTableDrop({ bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), questdb: mode, drops: 2, log });
    log(`table dropped under load, QuestDB ${mode}: ${tableDropPassed(drop) ? 'PASS' : 'FAIL'} ${JSON.stringify(drop)}`);
    if (!tableDropPassed(drop)) failed = true;
  }
  // MQTT publishers and the subscription to a site broker through kill -9 rounds and power cuts.
  const mqttRounds = Math.min(rounds, 6);
  if (
    !(await runMqttFaults({
      rounds: mqttRounds,
      cuts: Math.min(cuts, 3),
      questdbUrl: questdb.httpUrl,
      bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
      log,
    }))
  )
    failed = true;
  // The subscription exactly once: 4 bursts of 1,000 messages, one restart of the broker.
  if (
    !(await runSubscriberOnceFaults({
      rounds: 4,
      burst: 1000,
      brokerRestarts: 1,
      durabilities: ['power-loss'],
      control: false,
      bundlePath: join(projectRoot, 'dist', 'gateway.mjs'),
      questdbUrl: questdb.httpUrl,
      log,
    }))
  )
    failed = true;
  // Its own process: the fleet run starts its own QuestDB, Kafka and gateways and exits 1 on a loss.
  const fleet = spawnSync(process.execPath, [join(projectRoot, 'scripts', 'fleet', 'run.mjs'), '--sites', '3', '--seconds', '20'], {
    stdio: 'inherit',
  });
  log(`fleet run, 3 sites: ${fleet.status === 0 ? 'PASS' : `FAIL (exit ${fleet.status ?? fleet.signal})`}`);
  if (fleet.status !== 0) failed = true;
  // Devices over HTTP, HTTPS and MQTT while clients without a key attack; the long run is npm run test:abuse.
  // The devices' p99 within 3× in one of two runs (a timing: see runAbuse); a loss fails at once.
  const abuse = await runAbuse({ bundlePath: join(projectRoot, 'dist', 'gateway.mjs'), seconds: 15, log, attempts: 2 });
  log(`abuse, 15 s without and 15 s with the attack: ${abuse ? 'PASS' : 'FAIL'}`);
  if (!abuse) failed = true;
} finally {
  await questdb.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
