import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/log/logger.js';
import type { QueueRecord } from '../src/queue/queue-reader.js';
import { UpstreamTarget, type UpstreamTargetOptions } from '../src/sinks/upstream/upstream-target.js';
import { startTestGateway, TEST_KEY, type TestGateway } from './support/gateway.js';
import { HttpProxy } from './support/http-proxy.js';
import { sql, storedCounts, waitForCount, waitForDrained, waitForWalApplied } from './support/questdb-sql.js';

// The upstream sink against a real gateway as its destination (the destination's QuestDB shows
// what arrived); answers a gateway never gives are in src/sinks/upstream/upstream-target.test.ts.

const started: { stop(): Promise<void> }[] = [];
afterAll(async () => {
  for (const s of started.reverse()) await s.stop();
});

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startTestGateway(env);
  started.push(gw);
  return gw;
}

function target(url: string, options: Partial<UpstreamTargetOptions> = {}): UpstreamTarget {
  const t = new UpstreamTarget(
    {
      url,
      apiKey: TEST_KEY,
      caFile: undefined,
      proxy: undefined,
      timeoutMs: 10_000,
      maxReadings: 1000,
      maxBodyBytes: 1 << 20,
      site: 'site-a',
      ...options,
    },
    createLogger('silent'),
  );
  started.push({ stop: () => t.close() });
  return t;
}

const BASE_NS = 1_795_000_000_000_000_000n;

/** `count` records of `perRecord` readings with nanosecond times, reading n having value n. */
function records(count: number, perRecord: number, shipOf = (n: number) => `ship-${n % 7}`): QueueRecord[] {
  return Array.from({ length: count }, (_, id) => {
    const payload = Array.from({ length: perRecord }, (_, i) => {
      const n = id * perRecord + i;
      return `${BASE_NS + BigInt(n) * 1_000_001n}\t${shipOf(n)}\tcargo-${n % 3}\t${n + 0.25}`;
    }).join('\n');
    return { segment: 1, id: id + 1, receivedMs: Date.now(), readings: perRecord, bytes: payload.length, payload };
  });
}

/** Waits until the destination gateway has put everything it took into its table. */
async function settled(gw: TestGateway): Promise<void> {
  await waitForDrained(gw);
  await waitForWalApplied(gw.table);
}

describe('upstream sink to a real gateway', () => {
  it('delivers every reading with its nanosecond time; a replay lands on the same keys', async () => {
    const central = await gateway();
    const t = target(`${central.url}/api/v2/ingest/batch`);
    const batch = records(3, 100);
    // The run's first request holds 10 readings (plain JSON until the centre says what it takes), the rest one more.
    expect(await t.deliver(batch)).toEqual({ ok: true, requests: 2, deadLetters: [] });
    expect(await waitForCount(`SELECT count() FROM '${central.table}'`, 300)).toBe(300);
    const first = await sql<[string, string, string, number]>(
      `SELECT time, ship_id, cargo_id, value FROM '${central.table}' WHERE value = 1.25`,
    );
    expect(first.dataset).toEqual([['2026-11-18T11:06:40.001000001Z', 'ship-1', 'cargo-1', 1.25]]);

    expect(await t.deliver(batch)).toMatchObject({ ok: true, deadLetters: [] });
    await settled(central);
    expect(await storedCounts(central.table)).toMatchObject({ rows: 300 });
  });

  it("uses the hosted path form with the destination's harbor id; another id is the operator's to fix", async () => {
    const central = await gateway({ HARBOR_ID: 'harbor-7' });
    expect(await target(`${central.url}/api/v2/ingest/harbor-7/batch`).deliver(records(1, 10))).toMatchObject({ ok: true });
    expect(await waitForCount(`SELECT count() FROM '${central.table}'`, 10)).toBe(10);
    expect(await target(`${central.url}/api/v2/ingest/harbor-8/batch`).deliver(records(1, 10))).toMatchObject({
      ok: false,
      level: 'error',
      message: /^upstream answered 404/,
    });
  });

  it('fails with level error on a wrong key, dead-lettering nothing', async () => {
    const central = await gateway({ AUTH_FAILURE_DELAY_MAX_MS: '0' });
    const delivery = await target(`${central.url}/api/v2/ingest/batch`, { apiKey: 'wrong-key-0123456789' }).deliver(records(1, 5));
    expect(delivery).toMatchObject({ ok: false, level: 'error', message: /^upstream answered 401/ });
  });

  it('dead-letters the readings the destination refuses, with status and answer, and delivers the rest', async () => {
    const central = await gateway({ MAX_ID_LENGTH: '10' });
    const batch = records(2, 50, (n) => (n % 20 === 3 ? `ship-with-a-long-name-${n}` : `ship-${n % 7}`));
    const delivery = await target(`${central.url}/api/v2/ingest/batch`).deliver(batch);
    expect(delivery.ok).toBe(true);
    if (!delivery.ok) return;
    expect(delivery.deadLetters.map((d) => d.line.split('\t')[1])).toEqual([3, 23, 43, 63, 83].map((n) => `ship-with-a-long-name-${n}`));
    expect(delivery.deadLetters[0]!.reason).toMatch(/^upstream answered 422: .*ship_id/);
    expect(await waitForCount(`SELECT count() FROM '${central.table}'`, 95)).toBe(95);
    await settled(central);
    expect(await storedCounts(central.table)).toMatchObject({ rows: 95 });
  });

  it('halves batches the destination finds too large: over its reading limit (400) or its body limit (413)', async () => {
    const fewReadings = await gateway({ MAX_BATCH_READINGS: '7' });
    expect(await target(`${fewReadings.url}/api/v2/ingest/batch`).deliver(records(4, 25))).toMatchObject({ ok: true, deadLetters: [] });
    expect(await waitForCount(`SELECT count() FROM '${fewReadings.table}'`, 100)).toBe(100);

    const smallBodies = await gateway({ MAX_BODY_BYTES: '2KiB' });
    expect(await target(`${smallBodies.url}/api/v2/ingest/batch`).deliver(records(4, 25))).toMatchObject({ ok: true, deadLetters: [] });
    expect(await waitForCount(`SELECT count() FROM '${smallBodies.table}'`, 100)).toBe(100);
  });

  it("reaches the gateway's HTTPS through a CONNECT proxy, trusting its certificate from UPSTREAM_CA_FILE", async () => {
    const central = await gateway();
    const proxy = await HttpProxy.start();
    started.push({ stop: () => proxy.close() });
    const url = `https://localhost:${central.gateway.httpsPort}/api/v2/ingest/batch`;
    const caFile = join(central.dataDir, 'tls', 'cert.pem');

    const untrusted = await target(url, { proxy: proxy.url }).deliver(records(1, 10));
    expect(untrusted).toMatchObject({ ok: false, level: 'error', message: /UPSTREAM_CA_FILE/ });

    expect(await target(url, { proxy: proxy.url, caFile }).deliver(records(1, 10))).toMatchObject({ ok: true, deadLetters: [] });
    expect(proxy.tunnels).toBeGreaterThanOrEqual(2);
    expect(proxy.forwarded).toBe(0);
    expect(await waitForCount(`SELECT count() FROM '${central.table}'`, 10)).toBe(10);
  });

  it('keeps the batch while the destination is down (warn) and delivers it once it is back', async () => {
    const central = await gateway();
    const url = `${central.url}/api/v2/ingest/batch`;
    const t = target(url);
    await central.stop();
    expect(await t.deliver(records(1, 10))).toMatchObject({ ok: false, level: 'warn', message: /unreachable/ });
    const again = await gateway({ ...central.env, PORT: String(central.gateway.port) });
    expect(await t.deliver(records(1, 10))).toMatchObject({ ok: true });
    expect(await waitForCount(`SELECT count() FROM '${again.table}'`, 10)).toBe(10);
  });
});
