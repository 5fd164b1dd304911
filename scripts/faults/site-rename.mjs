// A site renamed under load: every restart of the site gateway gives it a new SITE_ID, within the
// replay window (the QuestDB sinks send what they keep again after each start), ending with a
// graceful stop in half the rounds and a kill -9 in the others. It has all its kinds of sink: its
// local QuestDB, the upstream sink to a central gateway (its own process, never renamed), Kafka
// and a remote QuestDB (another table of the same QuestDB over ILP/HTTP). Every answered reading
// must be in the local, central and remote tables exactly once under the site of the gateway that
// answered it, and in Kafka at least once, every copy under that site.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { createKafkaTopic, startKafka } from '../lib/kafka.mjs';

const CENTRAL_KEY = 'central-rename-key-0123456789';

/**
 * @param {{ rounds: number, questdbUrl: string, bundlePath: string, log?: (line: string) => void }} options
 * @returns {Promise<{ pass: boolean, report: import('../lib/crash-consistency.mjs').CrashReport }>}
 */
export async function runSiteRename({ rounds, questdbUrl, bundlePath, log = () => undefined }) {
  const broker = await startKafka();
  const run = `${process.pid}_${Date.now()}`;
  const centralDir = mkdtempSync(join(tmpdir(), 'harbor-site-rename-central-'));
  const centralTable = `site_rename_central_${run}`;
  const remoteTable = `site_rename_remote_${run}`;
  const central = await startGatewayProcess({
    bundle: bundlePath,
    env: {
      API_KEY: CENTRAL_KEY,
      DATA_DIR: centralDir,
      SITE_ID: `rename-centre-${run}`,
      QUESTDB_URL: questdbUrl,
      QUESTDB_TABLE: centralTable,
      DURABILITY: 'process-crash',
      RETENTION_DAYS: '0',
      HEALTH_REPORT: 'false',
      FLUSH_INTERVAL_MS: '100',
    },
  });
  // The site drained its upstream backlog before it stopped; the central gateway delivers what it queued.
  const centralDrained = async () => {
    for (let i = 0; i < 600; i++) {
      const status = /** @type {{ queue: { readings: number } }} */ (
        await (await fetch(`${central.url}/status`, { headers: { 'x-api-key': CENTRAL_KEY } })).json()
      );
      if (status.queue.readings === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the central gateway did not deliver what it queued within 60 s');
  };
  try {
    const topic = `site-rename-${Date.now()}`;
    await createKafkaTopic(broker.bootstrap, topic, 3);
    const report = await runCrashConsistency({
      rounds,
      durability: 'process-crash',
      questdbUrl,
      bundlePath,
      clients: 4,
      log,
      // Long enough for deliveries to every sink in each round, all well within the 60 s replay window.
      roundMs: { min: 500, max: 2000 },
      gracefulStops: 0.5,
      siteOfRound: (round) => `site-${run}-name-${round}`,
      sinkEnv: {
        UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
        UPSTREAM_API_KEY: CENTRAL_KEY,
        REMOTE_QUESTDB_URL: questdbUrl,
        REMOTE_QUESTDB_TABLE: remoteTable,
        FLUSH_BACKOFF_MAX_MS: '500',
      },
      alsoStoredIn: [centralTable, remoteTable],
      kafka: { broker, topic },
      settled: centralDrained,
    });
    const exact = (/** @type {import('../lib/crash-consistency.mjs').DestinationReport | undefined} */ d) =>
      d !== undefined && d.missing + d.forbidden + d.strangers + d.duplicates + (d.wrongSite ?? 1) === 0;
    const pass =
      report.missing.length + report.forbidden.length + report.strangers.length + report.duplicates + (report.wrongSite?.length ?? 1) ===
        0 &&
      exact(report.destinations?.[centralTable]) &&
      exact(report.destinations?.[remoteTable]) &&
      report.kafka !== undefined &&
      report.kafka.missing + report.kafka.strangers + (report.kafka.wrongSite ?? 1) === 0;
    return { pass, report };
  } finally {
    central.child.kill('SIGTERM');
    await central.exited;
    rmSync(centralDir, { recursive: true, force: true });
    await broker.close();
  }
}
