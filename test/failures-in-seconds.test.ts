import { afterAll, describe, expect, it } from 'vitest';
import { startDevices } from '../scripts/lib/device-load.mjs';
import { FaultProxy } from './support/fault-proxy.js';
import { createTopic, kafkaForTests } from './support/kafka.js';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, killAll, spawnGateway, type GatewayProcess } from './support/process.js';
import { waitUntil } from './support/wait.js';

// A destination that dies (kill -9 of the broker or of the central gateway) or goes silent (a
// proxy that stops answering) shows in the site's /status within 5 s, under load, long before the
// sinks' timeouts (30 s): as a failure with its error, or as an attempt waiting for an answer.

const VISIBLE_WITHIN_MS = 5_000;
const processes: GatewayProcess[] = [];
const testKafka = kafkaForTests();
let proxy: FaultProxy;

afterAll(async () => {
  await killAll(processes);
  await proxy?.close();
}, 60_000);

interface SinkStatus {
  name: string;
  consecutiveFailures: number;
  waitingSeconds: number | null;
  lastError: { message: string } | null;
  delivered: number;
}

async function sink(site: GatewayProcess, name: string): Promise<SinkStatus> {
  const status = (await (await fetch(`${site.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as { sinks: SinkStatus[] };
  return status.sinks.find((s) => s.name === name)!;
}

const shows = (s: SinkStatus): boolean => s.consecutiveFailures > 0 || s.waitingSeconds !== null;

async function spawn(env: Record<string, string>): Promise<GatewayProcess> {
  const p = await spawnGateway(gatewayEnv('visible', { DURABILITY: 'process-crash', FLUSH_INTERVAL_MS: '200', ...env }));
  processes.push(p);
  return p;
}

/** Runs load on `site` until `name` has delivered, cuts the destination with `cut`, and returns how long until /status showed it. */
async function timeToVisible(
  site: GatewayProcess,
  name: string,
  cut: () => void | Promise<void>,
): Promise<{ ms: number; sink: SinkStatus }> {
  const load = startDevices({ url: site.url, apiKey: TEST_KEY, date: '2026-06-02', batchSize: 20, devices: 2, pauseMs: 20 });
  try {
    await waitUntil(`${name} delivering`, async () => (await sink(site, name)).delivered > 100, 30_000);
    const cutAt = Date.now();
    await cut();
    let seen = await sink(site, name);
    await waitUntil(
      `${name} failing or waiting`,
      async () => {
        seen = await sink(site, name);
        return shows(seen);
      },
      30_000,
    );
    const ms = Date.now() - cutAt;
    const how = seen.consecutiveFailures > 0 ? `failing: ${seen.lastError?.message}` : `waiting ${seen.waitingSeconds} s`;
    console.info(`${name}: in /status ${ms} ms after the cut, ${how}`);
    return { ms, sink: seen };
  } finally {
    await load.stop();
  }
}

describe('a destination that dies or goes silent', () => {
  it('a Kafka broker killed -9 shows within 5 s', async () => {
    const topic = `visible-${Date.now().toString(36)}`;
    await createTopic(testKafka.broker.bootstrap, topic, 3);
    const site = await spawn({ KAFKA_BROKERS: testKafka.broker.bootstrap, KAFKA_TOPIC: topic });
    const { ms, sink: kafka } = await timeToVisible(site, 'kafka', () => {
      process.kill(testKafka.broker.pid()!, 'SIGKILL');
    });
    expect(ms, JSON.stringify(kafka)).toBeLessThan(VISIBLE_WITHIN_MS);
  }, 120_000);

  it('a central gateway killed -9 shows within 5 s', async () => {
    const central = await spawn({});
    // A site id of its own: under the central gateway's (both the host name) it would be refused as a second gateway.
    const site = await spawn({
      SITE_ID: 'site-of-its-own',
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
    });
    const { ms, sink: upstream } = await timeToVisible(site, 'upstream', () => {
      central.child.kill('SIGKILL');
    });
    expect(ms, JSON.stringify(upstream)).toBeLessThan(VISIBLE_WITHIN_MS);
    expect(upstream.lastError?.message).toMatch(/unreachable/);
  }, 120_000);

  it('an upstream that stops answering shows within 5 s', async () => {
    const central = await spawn({});
    proxy = await FaultProxy.start(central.url);
    const site = await spawn({ SITE_ID: 'site-of-its-own', UPSTREAM_URL: `${proxy.url}/api/v2/ingest/batch`, UPSTREAM_API_KEY: TEST_KEY });
    const { ms, sink: upstream } = await timeToVisible(site, 'upstream', () => proxy.set('stall'));
    expect(ms, JSON.stringify(upstream)).toBeLessThan(VISIBLE_WITHIN_MS);
    expect(upstream.waitingSeconds).toBeGreaterThanOrEqual(3);
  }, 120_000);
});
