import parsePrometheusTextFormat, { type MetricFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { waitForDrained } from './support/questdb-sql.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ CONSOLE_PASSWORD: 'metrics-test-console-password', METRICS_TOKEN: 'metrics-test-token-0123456789' });
});
afterAll(() => gw.stop());

const sample = (families: MetricFamily[], name: string, labels: Record<string, string> = {}): number => {
  const family = families.find((f) => f.name === name);
  if (family === undefined) throw new Error(`no metric family ${name}`);
  const found = family.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (found === undefined) throw new Error(`no sample of ${name} with ${JSON.stringify(labels)}`);
  return Number(found.value);
};

describe('/metrics', () => {
  it('is the Prometheus text format a real parser reads, with the counters /status and the console show', async () => {
    const reading = (value: unknown) => ({ time: '2026-02-04T10:00:00Z', ship_id: 'mast-1', cargo_id: 'wind', value });
    expect((await gw.post('/api/v2/ingest/batch', [reading(1), reading(2), { ...reading(3), cargo_id: 'gust' }])).status).toBe(200);
    expect((await gw.post('/api/v2/ingest', reading('x'))).status).toBe(422);
    expect((await gw.post('/api/v2/ingest', reading(1), { 'x-api-key': 'wrong-key' })).status).toBe(401);
    await waitForDrained(gw);

    const answer = await fetch(`${gw.url}/metrics`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const families = parsePrometheusTextFormat(await answer.text());
    const status = (await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': TEST_KEY } })).json()) as {
      totals: { acceptedReadings: number };
      queue: { readings: number; maxBytes: number };
      sinks: { name: string; delivered: number }[];
    };

    expect(families.find((f) => f.name === 'harbor_ingest_requests_total')?.type).toBe('COUNTER');
    expect(sample(families, 'harbor_ingest_requests_total', { status: '200' })).toBe(1);
    expect(sample(families, 'harbor_ingest_requests_total', { status: '422' })).toBe(1);
    expect(sample(families, 'harbor_ingest_requests_total', { status: '401' })).toBe(1);
    expect(sample(families, 'harbor_ingest_readings_total')).toBe(status.totals.acceptedReadings);
    expect(sample(families, 'harbor_wrong_key_requests_total')).toBe(1);
    expect(sample(families, 'harbor_queue_readings')).toBe(status.queue.readings);
    expect(sample(families, 'harbor_queue_max_bytes')).toBe(status.queue.maxBytes);
    expect(sample(families, 'harbor_sink_delivered_readings_total', { sink: 'questdb' })).toBe(3);
    expect(sample(families, 'harbor_sink_backlog_readings', { sink: 'questdb' })).toBe(0);
    expect(sample(families, 'harbor_dead_letters')).toBe(0);
    expect(sample(families, 'harbor_key_accepted_readings_total', { key: 'default' })).toBe(3);
    expect(sample(families, 'harbor_key_refused_requests_total', { key: 'default' })).toBe(1);
    expect(sample(families, 'harbor_state', { state: 'delivering' })).toBe(1);
    expect(sample(families, 'process_resident_memory_bytes')).toBeGreaterThan(1_000_000);
    expect(sample(families, 'harbor_gateway_info', { version: '0.0.0-dev' })).toBe(1);
  });
});
