import { afterAll, describe, expect, it } from 'vitest';
import { ConsoleClient } from './support/console-client.js';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { waitForCount } from './support/questdb-sql.js';

// A site whose upstream sink gathers readings for an interval of its own (UPSTREAM_FLUSH_INTERVAL_MS),
// to a real central gateway: the site's local QuestDB stays within FLUSH_INTERVAL_MS, the centre
// gets nothing before the upstream's interval ends unless a whole upstream batch is waiting, which
// goes at once. /status and the console's Overview name each sink's interval.

const PASSWORD = 'console-password-0123456789';

const started: TestGateway[] = [];
afterAll(async () => {
  for (const gw of started.reverse()) await gw.stop();
});

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startTestGateway(env);
  started.push(gw);
  return gw;
}

interface SinkStatus {
  name: string;
  flushIntervalMs: number;
  backlog: number;
  delivered: number;
}

async function sinks(gw: TestGateway): Promise<SinkStatus[]> {
  const response = await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } });
  return ((await response.json()) as { sinks: SinkStatus[] }).sinks;
}

const readings = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    time: new Date(Date.UTC(2026, 10, 30, 8, 0, 0) + (from + i) * 5000).toISOString(),
    ship_id: 'mv-aurora',
    cargo_id: 'hold1_temp_c',
    value: from + i,
  }));

describe('a flush interval per sink', () => {
  it('keeps the local QuestDB current while the upstream waits out its own interval, and sends a whole upstream batch at once', async () => {
    const central = await gateway();
    const site = await gateway({
      SITE_ID: 'interval-site',
      FLUSH_INTERVAL_MS: '200',
      UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: TEST_KEY,
      UPSTREAM_FLUSH_INTERVAL_MS: '600000',
      UPSTREAM_BATCH_READINGS: '100',
      CONSOLE_PASSWORD: PASSWORD,
    });
    expect((await sinks(site)).map((s) => [s.name, s.flushIntervalMs])).toEqual([
      ['questdb', 200],
      ['upstream', 600_000],
    ]);
    const technician = new ConsoleClient(site.url);
    expect((await technician.login(PASSWORD)).status).toBe(303);
    const overview = (await technician.request('/console/')).html;
    expect(overview).toContain('sends every 200 ms');
    expect(overview).toContain('sends every 600 s');

    expect((await site.post('/api/v2/ingest/batch', readings(0, 40))).status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM '${site.table}'`, 40)).toBe(40);
    // Five of the local sink's intervals later, the upstream still gathers.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await sinks(site)).find((s) => s.name === 'upstream')).toMatchObject({ backlog: 40, delivered: 0 });

    // Sixty more make a whole upstream batch: it goes now, ten minutes before the interval ends.
    expect((await site.post('/api/v2/ingest/batch', readings(40, 60))).status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM '${central.table}'`, 100, 20_000)).toBe(100);
    expect((await sinks(site)).find((s) => s.name === 'upstream')).toMatchObject({ backlog: 0, delivered: 100 });
    expect(await waitForCount(`SELECT count() FROM '${site.table}'`, 100)).toBe(100);
  });
});
