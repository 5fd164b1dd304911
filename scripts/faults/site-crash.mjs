// kill -9 rounds of a site gateway with all its kinds of sink: its local QuestDB, the upstream
// sink to a central gateway (its own process, never killed) and a Kafka broker killed -9 too, in
// half the rounds. Every answered reading must be in the local and the central table exactly
// once and in Kafka at least once; what Kafka holds more than once is counted.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { createKafkaTopic, startKafka } from '../lib/kafka.mjs';

const CENTRAL_KEY = 'central-fault-key-0123456789';

/**
 * @param {{ rounds: number, questdbUrl: string, bundlePath: string, log?: (line: string) => void }} options
 * @returns {Promise<{ pass: boolean, report: import('../lib/crash-consistency.mjs').CrashReport }>}
 */
export async function runSiteCrash({ rounds, questdbUrl, bundlePath, log = () => undefined }) {
  const broker = await startKafka();
  const centralDir = mkdtempSync(join(tmpdir(), 'harbor-site-crash-central-'));
  const centralTable = `site_crash_central_${process.pid}_${Date.now()}`;
  const central = await startGatewayProcess({
    bundle: bundlePath,
    env: {
      API_KEY: CENTRAL_KEY,
      DATA_DIR: centralDir,
      QUESTDB_URL: questdbUrl,
      QUESTDB_TABLE: centralTable,
      DURABILITY: 'process-crash',
      RETENTION_DAYS: '0',
      HEALTH_REPORT: 'false',
      FLUSH_INTERVAL_MS: '100',
    },
  });
  try {
    const topic = `site-crash-${Date.now()}`;
    await createKafkaTopic(broker.bootstrap, topic, 3);
    const report = await runCrashConsistency({
      rounds,
      durability: 'process-crash',
      questdbUrl,
      bundlePath,
      clients: 4,
      log,
      // A site id of its own: under the central gateway's (both the host name) it would be refused as a second gateway.
      sinkEnv: {
        SITE_ID: 'crash-site',
        UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
        UPSTREAM_API_KEY: CENTRAL_KEY,
        FLUSH_BACKOFF_MAX_MS: '500',
      },
      alsoStoredIn: [centralTable],
      kafka: { broker, topic, killBroker: 0.5 },
    });
    // The site drained its upstream backlog before it stopped; the central gateway delivers what it queued.
    const centralDrained = async () => {
      const status = /** @type {{ queue: { readings: number } }} */ (
        await (await fetch(`${central.url}/status`, { headers: { 'x-api-key': CENTRAL_KEY } })).json()
      );
      return status.queue.readings === 0;
    };
    for (let i = 0; i < 600 && !(await centralDrained()); i++) await new Promise((r) => setTimeout(r, 100));
    const centre = report.destinations?.[centralTable];
    const pass =
      report.missing.length + report.forbidden.length + report.strangers.length + report.duplicates === 0 &&
      centre !== undefined &&
      centre.missing + centre.forbidden + centre.strangers + centre.duplicates === 0 &&
      report.kafka !== undefined &&
      report.kafka.missing + report.kafka.strangers === 0;
    return { pass, report };
  } finally {
    central.child.kill('SIGTERM');
    await central.exited;
    rmSync(centralDir, { recursive: true, force: true });
    await broker.close();
  }
}
