// What a part that is off costs: nothing of it is loaded. The gateway runs as its own process with
// a preload that records every module either thread loads (test/support/loaded-modules.mjs); the
// source maps of the bundle's files name the sources behind them.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { SAMPLE_CATALOGUE } from './support/catalogue-sample.js';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv } from './support/process.js';
import { uniqueTable } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const PRELOAD = join(import.meta.dirname, 'support', 'loaded-modules.mjs');

/** Each optional part: its modules, none of which is loaded while the part is off. */
const PARTS = {
  console: /^src\/console\//,
  mqtt: /^src\/mqtt\/|^node_modules\/mqtt-packet\//,
  catalogue: /^src\/catalogue\/catalogue-file\.ts$|^node_modules\/yaml\//,
  fleetReport: /^src\/health\/fleet-reporter\.ts$|^src\/sinks\/upstream\/site-report\.ts$/,
  // The Kafka sink's code and client; the words /status describes its settings with are the spec's.
  kafka: /^src\/sinks\/kafka\/(?!describe-kafka\.ts$)|^node_modules\/@platformatic\/kafka\//,
} as const;

interface Status {
  totals: { flushedReadings: number };
  sinks: { name: string; failures: number }[];
  parts: Record<string, 'on' | 'off'>;
}

/**
 * Starts the bundle with `env`, sends one reading, waits until `settled` says so, and returns the
 * sources of every module its two threads loaded, the status and the start line.
 */
async function run(label: string, env: Record<string, string>, settled: (status: Status) => boolean) {
  const list = join(tempDir(label), 'loaded.txt');
  writeFileSync(list, '');
  const gw = await startGatewayProcess({
    bundle: inject('bundlePath'),
    env: { ...gatewayEnv(label, env), HARBOR_LOADED_MODULES: list },
    nodeArgs: ['--import', PRELOAD],
  });
  try {
    const headers = { 'X-API-Key': TEST_KEY };
    const status = async () => (await (await fetch(`${gw.url}/status`, { headers })).json()) as Status;
    const sent = await fetch(`${gw.url}/api/v2/ingest/`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ time: new Date().toISOString(), ship_id: 'ship-1', cargo_id: 'temperature', value: 4.5 }),
    });
    expect(sent.status).toBe(200);
    await waitUntil(`${label}: the reading delivered`, async () => settled(await status()), 30_000);
    const console = await fetch(`${gw.url}/console/`, { redirect: 'manual' });
    const metrics = await fetch(`${gw.url}/metrics`);
    return {
      sources: loadedSources(list),
      status: await status(),
      startLine: String(gw.logs.find((line) => line['event'] === 'started')?.['msg']),
      consoleStatus: console.status,
      metricsStatus: metrics.status,
    };
  } finally {
    gw.child.kill('SIGTERM');
    await gw.exited;
  }
}

/** The sources behind the bundle's files listed in `list`, as paths from the project (node_modules/… for packages). */
function loadedSources(list: string): string[] {
  const files = new Set(
    readFileSync(list, 'utf8')
      .split('\n')
      .filter((url) => url.startsWith('file:') && url.includes('/dist/')),
  );
  expect(files.size).toBeGreaterThan(1);
  return [...files].flatMap((url) => {
    const map = JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, 'utf8')) as { sources: string[] };
    return map.sources.map((source) => source.replace(/^.*?node_modules\//, 'node_modules/').replace(/^(\.\.\/)+/, ''));
  });
}

const partsLoaded = (sources: string[]) =>
  Object.fromEntries(Object.entries(PARTS).map(([part, pattern]) => [part, sources.some((source) => pattern.test(source))]));

describe('what loads when', () => {
  it('a plain site gateway (local QuestDB, HTTP and HTTPS ingest, the console off) loads none of the optional parts', async () => {
    const plain = await run('parts-plain', { CONSOLE: 'off', HEALTH_REPORT: 'true' }, (s) => s.totals.flushedReadings >= 1);
    // Both threads did their work: ingest, the queue, the local sink.
    expect(plain.sources).toEqual(expect.arrayContaining(['src/gateway.ts', 'src/http/routes/ingest.ts', 'src/sinks/sink-loop.ts']));
    expect(partsLoaded(plain.sources)).toEqual({ console: false, mqtt: false, catalogue: false, fleetReport: false, kafka: false });
    expect(plain.sources.filter((source) => /^src\/cli\/.*-command\.ts$/.test(source))).toEqual([]);
    expect(plain.status.parts).toEqual({
      console: 'off',
      mqtt: 'off',
      mqttSubscription: 'off',
      catalogue: 'off',
      fleetReport: 'off',
      kafka: 'off',
    });
    expect(plain.startLine).toMatch(/; console off \(CONSOLE=off\)$/);
    expect([plain.consoleStatus, plain.metricsStatus]).toEqual([404, 404]);
  });

  it('loads each part that is on', async () => {
    const catalogue = join(tempDir('parts-catalogue'), 'catalogue.yaml');
    writeFileSync(catalogue, SAMPLE_CATALOGUE);
    const everything = await run(
      'parts-on',
      {
        HEALTH_REPORT: 'true',
        CATALOGUE_FILE: catalogue,
        MQTT: 'on',
        MQTT_PORT: '0',
        MQTT_TLS_PORT: '0',
        // A broker that is not there: the sink loads Kafka's client for its first attempt all the same.
        KAFKA_BROKERS: `127.0.0.1:${await freePort()}`,
        KAFKA_TIMEOUT_MS: '2000',
        // The site's report goes to the centre's QuestDB (here the same one).
        REMOTE_QUESTDB_URL: inject('questdbUrl'),
        REMOTE_QUESTDB_TABLE: uniqueTable('parts_remote'),
      },
      (s) => s.totals.flushedReadings >= 1 && (s.sinks.find((sink) => sink.name === 'kafka')?.failures ?? 0) >= 1,
    );
    expect(partsLoaded(everything.sources)).toEqual({ console: true, mqtt: true, catalogue: true, fleetReport: true, kafka: true });
    expect(everything.status.parts).toEqual({
      console: 'on',
      mqtt: 'on',
      mqttSubscription: 'off',
      catalogue: 'on',
      fleetReport: 'on',
      kafka: 'on',
    });
    expect(everything.startLine).not.toContain('console off');
    expect(everything.consoleStatus).not.toBe(404);
  });
});
